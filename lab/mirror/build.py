#!/usr/bin/env python
"""Build the lab mirror: a signed APT repository of stand-in vendor packages.

Each file in lab/mirror/packages/*.yml describes one package: its real vendor name, the versions to
publish, and the files it installs (usually a hardware double from lab/doubles). The repository is
laid out like any internal mirror (dists/<suite>/main, pool/), signed with a key generated for this
checkout, and served to the lab nodes over HTTP. Roles consume it exactly like a vendor mirror.

A `src` that is a directory is a Python package with a __main__.py (lab/doubles/kube/kube_double): it is installed as one
executable zip application (PEP 441, as `python -m zipapp` makes one) that runs the package as `python -m <package>` would.

The DOCA stand-ins are also published as NVIDIA publishes DOCA: a flat repository (no dists/, APT suite "./")
at doca/<version>/debian12/x86_64/, like https://linux.mellanox.com/public/repo/doca/<version>/ubuntu22.04/x86_64/.
The Kubernetes packages are also published as pkgs.k8s.io publishes them: one flat repository per minor version at
core:/stable:/v<minor>/deb/ with its ASCII-armored key as Release.key beside it, like
https://pkgs.k8s.io/core:/stable:/v1.35/deb/ (a source left at one minor offers no package of the next).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import yaml

LAB_DIR = Path(__file__).resolve().parent.parent
SUITE = 'bookworm'
COMPONENT = 'main'
ARCHITECTURES = ('amd64',)
KEY_UID = 'onprem.gpu lab mirror <lab-mirror@onprem-gpu.invalid>'
KEY_FILE_NAME = 'onprem-gpu-lab.gpg'
# The key's fingerprint, beside the key home: the lab inventory pins it (onprem_gpu_mirror_key_fingerprint), as a site pins its mirror's.
FINGERPRINT_FILE_NAME = 'onprem-gpu-lab.fingerprint'
# Fixed timestamps make the same inputs give the same packages, so nodes see no spurious upgrades.
SOURCE_DATE_EPOCH = '1767225600'
GENERIC_PYTHON_SHEBANG = b'#!/usr/bin/env python\n'
PYTHON3_SHEBANG = b'#!/usr/bin/python3\n'
# The stand-ins of what NVIDIA's DOCA repository holds; its version is doca-roce's upstream version.
DOCA_PACKAGES = ('doca-roce', 'ibverbs-utils', 'mlnx-ofed-kernel-utils', 'mlnx-tools')
DOCA_RELEASE_DIR = 'debian12/x86_64'
# The packages pkgs.k8s.io publishes per minor version (its core:/stable:/v<minor>/deb/ repositories), as the lab has them.
KUBERNETES_PACKAGES = ('kubeadm', 'kubectl', 'kubelet')
SPEC_KEYS = {'name', 'versions', 'architecture', 'depends', 'section', 'description', 'files'}


class SpecError(Exception):
    """A package description that cannot be built, with a sentence saying what to fix."""


def load_specs(spec_dir: Path) -> list[dict]:
    specs = []
    for path in sorted(spec_dir.glob('*.yml')):
        spec = yaml.safe_load(path.read_text())
        check_spec(path, spec)
        specs.append(spec)
    return specs


def check_spec(path: Path, spec: object) -> None:
    if not isinstance(spec, dict):
        raise SpecError(f'{path}: a package description must be a mapping.')
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise SpecError(f'{path}: unknown keys {sorted(unknown)}; allowed are {sorted(SPEC_KEYS)}.')
    for key in ('name', 'versions', 'description', 'files'):
        if not spec.get(key):
            raise SpecError(f'{path}: `{key}` is required.')
    if path.stem != spec['name']:
        raise SpecError(f'{path}: the file must be named after the package ({spec["name"]}.yml).')
    for entry in spec['files']:
        if entry.get('directory') and 'dest' in entry and 'src' not in entry and 'content' not in entry:
            continue
        if 'dest' not in entry or ('src' in entry) == ('content' in entry):
            raise SpecError(f'{path}: each file needs `dest` and exactly one of `src` or `content` (or `directory: true`).')
        if 'src' in entry and not ((LAB_DIR / entry['src']).is_file() or (LAB_DIR / entry['src'] / '__main__.py').is_file()):
            raise SpecError(f'{path}: {entry["src"]} is neither a file nor a Python package with a __main__.py under lab/.')


def running_kernel_headers_spec() -> dict:
    """A stand-in linux-headers package for the kernel this machine runs, which every lab node shares.

    Real servers get headers for their kernel from the distribution; the lab's containers run the build
    machine's kernel, for which no distribution has headers, so the mirror publishes a stand-in under the
    distribution's name. Roles then check for and install headers exactly as on a real server.
    """
    release = os.uname().release
    numeric = re.match(r'\d+(?:\.\d+)*', release)
    return {
        'name': f'linux-headers-{release}',
        'versions': [f'{numeric.group(0) if numeric else "0"}-1'],
        'section': 'kernel',
        'description': f'Header files for Linux {release}\nLab stand-in generated for the running kernel: no header is installed.',
        'files': [{'dest': f'/usr/src/linux-headers-{release}/README.lab',
                   'content': f'Lab stand-in for the headers of Linux {release}; DKMS builds nothing in the lab.\n'}],
    }


def upstream_version(version: str) -> str:
    """580.65.06-1 -> 580.65.06 (Debian revision and epoch stripped)."""
    return version.split(':', 1)[-1].rsplit('-', 1)[0]


def build_deb(spec: dict, version: str, pool: Path) -> Path:
    architecture = spec.get('architecture', 'all')
    substitutions = {'version': version, 'upstream_version': upstream_version(version), 'name': spec['name']}
    with tempfile.TemporaryDirectory() as staging_dir:
        root = Path(staging_dir)
        for entry in spec['files']:
            target = root / entry['dest'].lstrip('/')
            if entry.get('directory'):
                # An empty directory the real package ships (kubelet's /etc/kubernetes/manifests).
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(int(str(entry.get('mode', '0755')), 8))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if 'src' in entry:
                target.write_bytes(installed_content(LAB_DIR / entry['src']))
            else:
                target.write_text(string.Template(entry['content']).substitute(substitutions))
            target.chmod(int(str(entry.get('mode', '0644')), 8))
        control = {
            'Package': spec['name'],
            'Version': version,
            'Architecture': architecture,
            'Maintainer': 'onprem.gpu lab <lab-mirror@onprem-gpu.invalid>',
            'Section': spec.get('section', 'misc'),
            'Priority': 'optional',
            'Depends': ', '.join(spec.get('depends', [])),
            'Description': 'lab stand-in: ' + spec['description'].strip().replace('\n', '\n '),
        }
        (root / 'DEBIAN').mkdir()
        (root / 'DEBIAN' / 'control').write_text(''.join(f'{key}: {value}\n' for key, value in control.items() if value))
        deb = pool / spec['name'][0] / spec['name'] / f'{spec["name"]}_{version.split(":")[-1]}_{architecture}.deb'
        deb.parent.mkdir(parents=True, exist_ok=True)
        run(['dpkg-deb', '--root-owner-group', '-Zxz', '--build', str(root), str(deb)], env={'SOURCE_DATE_EPOCH': SOURCE_DATE_EPOCH})
    return deb


def installed_content(source: Path) -> bytes:
    """What a `src` installs: a file with a generic Python shebang pointed at python3 as dh_python3 does, a package directory as a
    zip application (zip_application)."""
    if source.is_dir():
        return zip_application(source)
    content = source.read_bytes()
    if content.startswith(GENERIC_PYTHON_SHEBANG):
        content = PYTHON3_SHEBANG + content[len(GENERIC_PYTHON_SHEBANG):]
    return content


def zip_application(package: Path) -> bytes:
    """The package's Python files under its name, and a __main__.py that runs it as `python -m <package>` would (argv untouched,
    so a program that acts as the name it is called by still sees it), behind a python3 shebang. The files' order, times and modes
    are fixed, so the same sources give the same bytes (and the same package)."""
    files = sorted(file for file in package.rglob('*.py') if '__pycache__' not in file.parts)
    entries = [('__main__.py', f'import runpy\nrunpy.run_module({package.name!r}, run_name="__main__")\n'.encode())]
    entries += [(f'{package.name}/{file.relative_to(package).as_posix()}', file.read_bytes()) for file in files]
    buffer = io.BytesIO()
    buffer.write(PYTHON3_SHEBANG)
    with zipfile.ZipFile(buffer, 'w') as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=time.gmtime(int(SOURCE_DATE_EPOCH))[:6])
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def run(argv: list[str], env: dict | None = None, cwd: Path | None = None, stdout=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, LC_ALL='C', **(env or {}))
    return subprocess.run(argv, check=True, env=full_env, cwd=cwd, stdout=stdout, text=True)


def ensure_signing_key(gnupg_home: Path) -> str:
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {'GNUPGHOME': str(gnupg_home)}
    listing = run(['gpg', '--batch', '--with-colons', '--list-secret-keys'], env=env, stdout=subprocess.PIPE).stdout
    if 'sec:' not in listing:
        run(['gpg', '--batch', '--quiet', '--passphrase', '', '--quick-gen-key', KEY_UID, 'ed25519', 'sign', 'never'], env=env)
        listing = run(['gpg', '--batch', '--with-colons', '--list-secret-keys'], env=env, stdout=subprocess.PIPE).stdout
    return next(line.split(':')[9] for line in listing.splitlines() if line.startswith('fpr:'))


def write_packages(directory: Path, packages: str) -> None:
    """Packages and a reproducible Packages.gz (the build's fixed mtime) in directory."""
    (directory / 'Packages').write_text(packages)
    with gzip.GzipFile(directory / 'Packages.gz', 'wb', mtime=int(SOURCE_DATE_EPOCH)) as compressed:
        compressed.write(packages.encode())


def write_indexes(repo: Path) -> Path:
    dist = repo / 'dists' / SUITE
    for architecture in ARCHITECTURES:
        binary_dir = dist / COMPONENT / f'binary-{architecture}'
        binary_dir.mkdir(parents=True, exist_ok=True)
        write_packages(binary_dir, run(['apt-ftparchive', '--arch', architecture, 'packages', 'pool'], cwd=repo, stdout=subprocess.PIPE).stdout)
    release = run([
        'apt-ftparchive',
        '-o', 'APT::FTPArchive::Release::Origin=onprem.gpu lab',
        '-o', 'APT::FTPArchive::Release::Label=onprem.gpu lab mirror',
        '-o', f'APT::FTPArchive::Release::Suite={SUITE}',
        '-o', f'APT::FTPArchive::Release::Codename={SUITE}',
        '-o', f'APT::FTPArchive::Release::Architectures={" ".join(ARCHITECTURES)}',
        '-o', f'APT::FTPArchive::Release::Components={COMPONENT}',
        'release', '.',
    ], cwd=dist, env={'SOURCE_DATE_EPOCH': SOURCE_DATE_EPOCH}, stdout=subprocess.PIPE).stdout
    (dist / 'Release').write_text(release)
    return dist


def pool_debs(repo: Path, spec: dict) -> list[Path]:
    """The packages the pool holds of one spec, every version, in name order."""
    return sorted((repo / 'pool' / COMPONENT / spec['name'][0] / spec['name']).glob('*.deb'))


def write_flat_doca_repository(repo: Path, specs: list[dict]) -> Path:
    """doca/<version>/debian12/x86_64/ with the DOCA stand-ins' packages."""
    doca = next(spec for spec in specs if spec['name'] == 'doca-roce')
    debs = [deb for spec in specs if spec['name'] in DOCA_PACKAGES for deb in pool_debs(repo, spec)]
    return write_flat_repository(repo / 'doca' / upstream_version(str(doca['versions'][-1])) / DOCA_RELEASE_DIR, debs, 'onprem.gpu lab DOCA')


def write_flat_repository(flat: Path, debs: list[Path], label: str) -> Path:
    """A flat repository in ``flat``: the packages as hard links to the pool's, Packages(.gz) and Release side by side,
    as a flat repository has them (Filename: ./<deb>)."""
    flat.mkdir(parents=True)
    for deb in debs:
        os.link(deb, flat / deb.name)
    write_packages(flat, run(['apt-ftparchive', 'packages', '.'], cwd=flat, stdout=subprocess.PIPE).stdout)
    release = run([
        'apt-ftparchive',
        '-o', 'APT::FTPArchive::Release::Origin=onprem.gpu lab',
        '-o', f'APT::FTPArchive::Release::Label={label}',
        '-o', f'APT::FTPArchive::Release::Architectures={" ".join(ARCHITECTURES)}',
        'release', '.',
    ], cwd=flat, env={'SOURCE_DATE_EPOCH': SOURCE_DATE_EPOCH}, stdout=subprocess.PIPE).stdout
    (flat / 'Release').write_text(release)
    return flat


def write_pkgs_k8s_io_repositories(repo: Path, specs: list[dict]) -> list[Path]:
    """core:/stable:/v<minor>/deb/, one flat repository per minor version of the Kubernetes packages, each with only that
    minor's packages, as pkgs.k8s.io publishes them (its Release.key is written by export_public_key)."""
    by_minor = {}
    for spec in specs:
        if spec['name'] in KUBERNETES_PACKAGES:
            for deb in pool_debs(repo, spec):
                minor = '.'.join(deb.name.split('_')[1].split('.')[:2])
                by_minor.setdefault(minor, []).append(deb)
    return [write_flat_repository(repo / 'core:' / 'stable:' / f'v{minor}' / 'deb', debs, f'onprem.gpu lab pkgs.k8s.io v{minor}')
            for minor, debs in sorted(by_minor.items())]


def sign_release(dist: Path, gnupg_home: Path, fingerprint: str) -> None:
    env = {'GNUPGHOME': str(gnupg_home)}
    for stale in ('InRelease', 'Release.gpg'):
        (dist / stale).unlink(missing_ok=True)
    run(['gpg', '--batch', '--yes', '--local-user', fingerprint, '--clearsign', '--output', 'InRelease', 'Release'], env=env, cwd=dist)
    run(['gpg', '--batch', '--yes', '--local-user', fingerprint, '--armor', '--detach-sign', '--output', 'Release.gpg', 'Release'],
        env=env, cwd=dist)


def export_public_key(repo: Path, gnupg_home: Path, fingerprint: str, key_copies: list[Path] = ()) -> None:
    """The key at the repository's root, binary and ASCII-armored; the armored one also in each of ``key_copies``."""
    env = {'GNUPGHOME': str(gnupg_home)}
    run(['gpg', '--batch', '--yes', '--output', str(repo / KEY_FILE_NAME), '--export', fingerprint], env=env)
    armored = repo / (KEY_FILE_NAME[:-4] + '.asc')
    run(['gpg', '--batch', '--yes', '--armor', '--output', str(armored), '--export', fingerprint], env=env)
    for copy in key_copies:
        shutil.copyfile(armored, copy)


def publish(staging: Path, repo: Path) -> None:
    retired = repo.with_name('repo.old')
    shutil.rmtree(retired, ignore_errors=True)
    if repo.exists():
        repo.rename(retired)
    staging.rename(repo)
    shutil.rmtree(retired, ignore_errors=True)


def inputs_digest(specs: list[dict], fingerprint: str) -> str:
    digest = hashlib.sha256(json.dumps(specs, sort_keys=True).encode() + fingerprint.encode())
    digest.update(Path(__file__).read_bytes())
    for spec in specs:
        for entry in spec['files']:
            if 'src' in entry:
                digest.update(installed_content(LAB_DIR / entry['src']))
    return digest.hexdigest()


def build(output: Path) -> None:
    specs = load_specs(LAB_DIR / 'mirror' / 'packages') + [running_kernel_headers_spec()]
    gnupg_home = output / 'gnupg'
    fingerprint = ensure_signing_key(gnupg_home)
    (output / FINGERPRINT_FILE_NAME).write_text(fingerprint + '\n')
    # The mirror container serves published/repo; a new build is swapped in by renames so that a
    # running mirror (which mounts published/) serves either the old or the new tree, never half of one.
    published = output / 'published'
    repo = published / 'repo'
    stamp = output / 'repo.digest'
    digest = inputs_digest(specs, fingerprint)
    if stamp.is_file() and stamp.read_text() == digest and (repo / 'dists' / SUITE / 'InRelease').is_file():
        print(f'Lab mirror in {repo} is up to date ({len(specs)} packages).')
        return
    staging = published / 'repo.new'
    shutil.rmtree(staging, ignore_errors=True)
    for spec in specs:
        for version in spec['versions']:
            build_deb(spec, str(version), staging / 'pool' / COMPONENT)
    dist = write_indexes(staging)
    sign_release(dist, gnupg_home, fingerprint)
    sign_release(write_flat_doca_repository(staging, specs), gnupg_home, fingerprint)
    kubernetes = write_pkgs_k8s_io_repositories(staging, specs)
    for flat in kubernetes:
        sign_release(flat, gnupg_home, fingerprint)
    export_public_key(staging, gnupg_home, fingerprint, [flat / 'Release.key' for flat in kubernetes])
    publish(staging, repo)
    stamp.write_text(digest)
    print(f'Built lab mirror in {repo}: ' + ', '.join(f'{s["name"]} {", ".join(map(str, s["versions"]))}' for s in specs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', type=Path, default=LAB_DIR.parent / '.build' / 'lab' / 'mirror',
                        help='where the signing key and published/repo are written (default: .build/lab/mirror)')
    args = parser.parse_args()
    try:
        build(args.output.resolve())
    except SpecError as error:
        print(f'lab mirror: {error}', file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as error:
        print(f'lab mirror: {" ".join(error.cmd)} failed with exit code {error.returncode}.', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
