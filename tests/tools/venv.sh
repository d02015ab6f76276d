#!/usr/bin/env bash
# Make .venv, the pinned toolchain of requirements.txt (Ansible, molecule, pytest, ansible-lint).
#
#   bash tests/tools/venv.sh PYTHON VENV KEY
#
# KEY names one requirements.txt on one Python (the Makefile hashes both). Where VENV_CACHE
# (/var/cache/onprem-gpu/venv) is writable, as it is for root who runs `make lab` and `make test`, the environment is
# installed once per KEY there and VENV is a link to it: a fresh clone of an unchanged requirements.txt then installs
# nothing (about 35 s of the 2-core reference machine), and the bytecode Python wrote on earlier runs is reused. As
# with any package cache, a changed requirements.txt or Python gets its own environment. Elsewhere VENV is installed
# in place, as before. Either way VENV/.installed-KEY is written last, so a cut-short install is redone.
set -euo pipefail

python=$1 venv=$2 key=$3
cache=${VENV_CACHE:-/var/cache/onprem-gpu/venv}
stamp=.installed-$key

install() {
    rm -rf "$1"
    "$python" -m venv "$1"
    "$1/bin/pip" install --quiet --upgrade pip
    # --no-compile: byte-compiling every file of the ansible package took 50 of the 66 s its install cost here;
    # Python compiles what is imported, once, on first use.
    "$1/bin/pip" install --quiet --no-compile -r requirements.txt
    touch "$1/$stamp"
}

if mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]]; then
    exec 9>"$cache/.lock"
    flock 9
    if [[ ! -e $cache/$key/$stamp ]]; then
        echo "Installing the toolchain of requirements.txt into $cache/$key"
        install "$cache/$key"
    fi
    touch "$cache/$key"
    # An environment installed in place by an older checkout, or a link to another KEY.
    rm -rf "$venv"
    ln -s "$cache/$key" "$venv"
    # Environments of other requirements no clone has used for 30 days.
    find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -mtime +30 -exec rm -rf {} +
else
    install "$venv"
fi
