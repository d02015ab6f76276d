"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test fetches get-pip from a host outside the package registries before it builds its
virtual environments; this machine reaches PyPI only. This script is installed at the cache path
ansible-test checks first (~/.ansible/test/cache/get_pip_<version>.py): it bootstraps pip from the
interpreter's own ensurepip, then installs the requested packages from the configured index.
"""
from __future__ import annotations

import os
import subprocess
import sys

# get-pip options that plain `pip install` does not know.
GET_PIP_ONLY_OPTIONS = {'--no-setuptools', '--no-wheel'}


def main() -> None:
    # ansible-test hides the machine's pip configuration; the index and certificates live there.
    os.environ.pop('PIP_CONFIG_FILE', None)
    subprocess.run([sys.executable, '-m', 'ensurepip', '--upgrade', '--default-pip'], check=True, stdout=subprocess.DEVNULL)
    wanted = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    if wanted:
        subprocess.run([sys.executable, '-m', 'pip', 'install'] + wanted, check=True)


if __name__ == '__main__':
    main()
