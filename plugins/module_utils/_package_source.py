# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The package sources of the collection's roles: one file per repository whichever role writes it, and one way to
ask a repository what it offers.

Plain Python without Ansible imports: the package_source module (the package_source role's one task) and the
nvidia_driver_plan module call it; commands run through the ``run`` callable they pass (argv list -> rc, stdout, stderr).

File formats: deb822 sources (sources.list(5), "DEB822-STYLE FORMAT"; Signed-By names a keyring file, .asc for an
ASCII-armored key, .gpg for a binary one), yum/dnf .repo files (dnf.conf(5), repo options baseurl, gpgcheck, gpgkey) and
APT preferences (apt_preferences(5): one "Package / Pin: version / Pin-Priority" stanza per pinned package, as NVIDIA's
Driver Installation Guide, "Version locking", pins the driver on Debian and Ubuntu).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import shutil
import tempfile

from ansible_collections.onprem.gpu.plugins.module_utils._validate import fingerprint, fingerprint_problem

HEADER = "Managed by onprem.gpu: local changes are overwritten."
ARMORED_KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
FAMILIES = ("Debian", "RedHat")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CALLERS = ("onprem.gpu.nvidia_driver", "onprem.gpu.container_runtime", "onprem.gpu.kube_node", "onprem.gpu.nccl_tests", "onprem.gpu.rdma",
           "onprem.gpu.acceptance", "onprem.gpu.etcd_backup")


def including_role(parent_roles):
    """The innermost of the collection's roles that include this one, without the collection prefix (kube_node), or None.

    ``parent_roles`` is ``ansible_parent_role_names``: the role that included this one first, then the roles around it.
    """
    for name in parent_roles or []:
        qualified = name if "." in name else f"onprem.gpu.{name}"
        if qualified in CALLERS:
            return qualified.rsplit(".", maxsplit=1)[-1]
    return None


def caller_problem(parent_roles):
    """The guard of the internal role: one sentence unless one of the collection's roles includes it."""
    if including_role(parent_roles):
        return None
    return ("onprem.gpu.package_source is internal to the onprem.gpu collection: its roles (" + ", ".join(name.rsplit(".", maxsplit=1)[-1] for name in CALLERS)
            + ") include it with their repository settings; set those roles' *_repo_url variables (or onprem_gpu_mirror_url) instead.")


def input_problems(repositories):
    """Problems of the repositories asked for, each one sentence: nothing is fetched or written while there is one."""
    problems, seen = [], {}
    for repository in repositories:
        name = repository.get("name") or ""
        if not _NAME.fullmatch(name):
            problems.append(f"The repository name '{name}' is not a file name (letters, digits, '.', '_', '-').")
            continue
        if not repository.get("url") or not repository.get("key_url"):
            problems.append(f"The repository {name} needs both a URL and the URL of the key that signs it "
                            f"(got url '{repository.get('url') or ''}', key_url '{repository.get('key_url') or ''}').")
        else:
            problems += [problem for problem in [key_url_problem(repository)] if problem]
        settings = tuple((key, str(repository.get(key))) for key in ("url", "suites", "components", "key_url", "key_fingerprint"))
        if seen.setdefault(name, settings) != settings:
            problems.append(f"The repository {name} is given twice with different settings: one name is one file, so give each "
                            "repository its own name or the same URL, suites, components and key.")
    return problems


# ------------------------------------------------------------------ trusting a signing key
# A key fetched over plain HTTP is whatever the network path hands over, and APT then trusts every package it signs (as root,
# on every node): such a key is used only when its fingerprint is pinned (key_fingerprint) and matches.


def key_url_problem(repository):
    """Why a repository's key may not be fetched as given, one sentence, or None: the fingerprint must be a full one, and
    the key URL https://, or http:// with the fingerprint pinned."""
    name, url, pin = repository.get("name") or "", repository.get("key_url") or "", repository.get("key_fingerprint") or ""
    problem = fingerprint_problem(f"The key_fingerprint of the repository {name}", pin)
    if problem:
        return problem
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "https" or (scheme == "http" and fingerprint(pin)):
        return None
    if scheme == "http":
        return (f"The repository {name} takes its signing key from {url} over plain HTTP with no key_fingerprint, so anything on the network "
                "path could hand over another key and get packages installed as root on every node: pin the key's fingerprint (the role's "
                "*_repo_key_fingerprint, or onprem_gpu_mirror_key_fingerprint for the site's mirror) or serve the key over https://.")
    return (f"The key URL {url!r} of the repository {name} must be an https:// URL, or an http:// one with the key's fingerprint pinned "
            "(key_fingerprint).")


def _armored_payload(text):
    """The bytes inside an ASCII-armored block (RFC 4880 section 6.2): after the armor headers, before the checksum line."""
    lines = text.splitlines()
    start = next((position for position, line in enumerate(lines) if line.strip() == ARMORED_KEY), None)
    if start is None:
        return b""
    body, in_headers = [], True
    for line in lines[start + 1:]:
        line = line.strip()
        if line.startswith("-----END"):
            break
        if in_headers:
            # Armor headers ("Comment: ...") end at the first blank line; a block without headers starts with data at once.
            if not line or ":" in line:
                in_headers = bool(line)
                continue
            in_headers = False
        if line.startswith("="):
            break
        body.append(line)
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError):
        return b""


def key_fingerprints(content):
    """The fingerprints (upper-case hex) of the primary public keys in a key file, ASCII-armored or binary (RFC 4880 section
    4.2 packet framing; v4 fingerprints are SHA-1 over 0x99, the 2-byte length and the key packet, RFC 4880 section 12.2;
    v6 ones SHA-256 over 0x9B and a 4-byte length, RFC 9580 section 5.5.4). Subkeys are not listed; nothing parsable gives []."""
    data = content.encode() if isinstance(content, str) else (content or b"")
    if is_armored(data):
        data = _armored_payload(data.decode("utf-8", "replace"))
    found, position = [], 0
    while position < len(data):
        header = data[position]
        if not header & 0x80:
            break
        if header & 0x40:
            tag, first = header & 0x3F, position + 1
            if first >= len(data):
                break
            octet = data[first]
            if octet < 192:
                length, start = octet, first + 1
            elif octet < 224 and first + 1 < len(data):
                length, start = ((octet - 192) << 8) + data[first + 1] + 192, first + 2
            elif octet == 255:
                length, start = int.from_bytes(data[first + 1:first + 5], "big"), first + 5
            else:
                break
        else:
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            if kind == 3:
                length, start = len(data) - position - 1, position + 1
            else:
                size = (1, 2, 4)[kind]
                length, start = int.from_bytes(data[position + 1:position + 1 + size], "big"), position + 1 + size
        body = data[start:start + length]
        if len(body) < length:
            break
        if tag == 6 and body:
            if body[0] == 4:
                digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest()  # nosec - the OpenPGP v4 fingerprint is SHA-1
            elif body[0] == 6:
                digest = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest()
            else:
                digest = None
            if digest and digest.upper() not in found:
                found.append(digest.upper())
        position = start + length
    return found


def key_pin_problem(repository, content):
    """Why a fetched key is not the one pinned (key_fingerprint), one sentence, or None (also when nothing is pinned)."""
    wanted = fingerprint(repository.get("key_fingerprint") or "")
    if not wanted:
        return None
    found = key_fingerprints(content)
    if found == [wanted]:
        return None
    carried = f"carries the key {', '.join(found)}" if found else "carries no OpenPGP public key"
    return (f"The signing key {repository.get('key_url')} of the repository {repository.get('name')} {carried} where key_fingerprint pins "
            f"{wanted} (and only that key): it is not installed; check that the mirror serves the right key and the fingerprint its "
            "publisher gives.")


def key_problem(answer):
    """Why a fetched key cannot be used ({status, msg, content}), or None."""
    status = answer.get("status") or -1
    if status == 200 and answer.get("content"):
        return None
    if status > 0:
        return f"answered HTTP {status} with no signing key"
    return f"is unreachable ({answer.get('msg') or 'no answer'})"


def key_sentence(answer):
    """The sentence for a key that cannot be used ({name, url, problem})."""
    return (f"The {answer['name']} repository cannot be used: its key {answer['url']} {answer['problem']}; check the role's *_repo_url and "
            "*_repo_key_url (or onprem_gpu_mirror_url and onprem_gpu_mirror_key_url), that the mirror is up, and the network path "
            "(DNS, proxy, firewall) from this host to it.")


def keyring_path(family, name, content):
    """Where the key of repository ``name`` lives: APT's keyrings (.asc armored, .gpg binary) or RPM's GPG directory."""
    if family == "RedHat":
        return f"/etc/pki/rpm-gpg/{name}.asc"
    return f"/etc/apt/keyrings/{name}.{'asc' if is_armored(content) else 'gpg'}"


def is_armored(content):
    if isinstance(content, bytes):
        return ARMORED_KEY.encode() in content
    return ARMORED_KEY in (content or "")


def source_path(family, name):
    return f"/etc/yum.repos.d/{name}.repo" if family == "RedHat" else f"/etc/apt/sources.list.d/{name}.sources"


def suites(repository, codename):
    """The suites written: those given, else the distribution's codename (bookworm, jammy, noble)."""
    return list(repository.get("suites") or []) or [codename]


def source_text(family, repository, keyring, codename):
    """The one text of a repository's file, whichever role writes it."""
    if family == "RedHat":
        name = repository["name"]
        lines = [f"# {HEADER}", f"[{name}]", f"name={name} (managed by onprem.gpu)", f"baseurl={repository['url']}", "enabled=1", "gpgcheck=1",
                 f"gpgkey=file://{keyring}"]
    else:
        lines = [f"# {HEADER}", "Types: deb", f"URIs: {repository['url']}", f"Suites: {' '.join(suites(repository, codename))}"]
        if repository.get("components"):
            lines.append(f"Components: {' '.join(repository['components'])}")
        lines.append(f"Signed-By: {keyring}")
    return "\n".join(lines) + "\n"


def desired_files(family, repositories, keys, codename):
    """Path -> content (str or bytes) of every key and source file of the repositories; ``keys`` maps names to key contents."""
    files = {}
    for repository in repositories:
        key = keys[repository["name"]]
        keyring = keyring_path(family, repository["name"], key)
        files[keyring] = key
        files[source_path(family, repository["name"])] = source_text(family, repository, keyring, codename)
    return files


# ------------------------------------------------------------------ what a repository offers


def parse_madison(text):
    """``apt-cache madison`` lines ("name | version | source") as (name, version) pairs."""
    offers = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) >= 3 and cells[0] and cells[1]:
            offers.append((cells[0], cells[1]))
    return offers


_DNF_LINE = re.compile(r"^(\S+)\.\S+\s+(?:[0-9]+:)?(\S+)\s+\S+$")


def parse_dnf_list(text):
    """``dnf list --showduplicates`` lines ("name.arch [epoch:]version-release repository") as (name, version) pairs."""
    return [match.groups() for match in map(_DNF_LINE.match, text.splitlines()) if match]


def version_matches(version, wanted):
    """Whether a package version (Debian 1.18.0-1, 2:1.35.0-1.1; RPM 580.65.06-1.el9) is of the wanted upstream version."""
    version = re.sub(r"^[0-9]+:", "", version)
    return version == wanted or version.startswith(wanted + "-")


def split_request(request):
    """"name" or "name=version" -> (name, version or None)."""
    name, _sep, version = request.partition("=")
    return name, (version or None)


def unsatisfied_requests(packages, requests):
    """The (name, version) requests that {name: {installed, offered}} (apt-cache policy, dnf list) does not show installed
    at their version and offered at it: what fresh package lists could change. A request without a version takes any."""
    unsatisfied = []
    for name, version in requests:
        package = packages.get(name) or {}
        installed, offered = package.get("installed"), package.get("offered") or []
        at_version = not version or (version_matches(installed or "", version) and any(version_matches(found, version) for found in offered))
        if not installed or not offered or not at_version:
            unsatisfied.append((name, version))
    return unsatisfied


def judge_offers(offers, requests):
    """{offered: {name: [versions]}, missing: [requests not offered]} for "name" / "name=version" requests."""
    offered = {split_request(request)[0]: [] for request in requests}
    for name, version in offers:
        if name in offered and version not in offered[name]:
            offered[name].append(version)
    missing = []
    for request in requests:
        name, version = split_request(request)
        if not any(version is None or version_matches(found, version) for found in offered[name]):
            missing.append(request)
    return {"offered": offered, "missing": missing}


def apt_probe_options(work):
    """APT options that read only the sources in ``work`` into lists in ``work``, leaving the host's lists alone."""
    return ["-o", f"Dir::Etc::SourceList={work}/probe.sources", "-o", "Dir::Etc::SourceParts=-", "-o", f"Dir::State::Lists={work}/lists",
            "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache="]


def repository_offers(run, family, repositories, keys, codename, names, apt_uid=None):
    """What the repositories themselves offer of ``names``: (offers [(name, version)], problem or None).

    APT reads them through a private configuration in a temporary directory removed afterwards, so the answer is the
    same before their files are written (check mode, a first run) and the host's own package lists do not change.
    """
    if not names or not repositories:
        return [], None
    if family == "RedHat":
        offers = []
        for repository in repositories:
            probe = f"onprem-gpu-probe-{repository['name']}"
            argv = ["dnf", "--quiet", f"--repofrompath={probe},{repository['url']}", f"--repo={probe}", f"--setopt={probe}.gpgcheck=0",
                    "list", "--showduplicates", "--available"] + list(names)
            rc, stdout, stderr = run(argv)
            if rc not in (0, 1):
                return None, f"DNF cannot read the repository {repository['url']}: {(stderr or stdout).strip()}"
            offers += parse_dnf_list(stdout)
        return offers, None
    work = tempfile.mkdtemp(prefix="onprem-gpu-apt-")
    try:
        # APT downloads as the unprivileged _apt user, which must read the keys and write the lists.
        os.chmod(work, 0o755)
        os.makedirs(os.path.join(work, "lists", "partial"))
        if apt_uid is not None:
            for directory in (os.path.join(work, "lists"), os.path.join(work, "lists", "partial")):
                os.chown(directory, apt_uid, -1)
        texts = []
        for repository in repositories:
            key = keys[repository["name"]]
            keyring = os.path.join(work, os.path.basename(keyring_path(family, repository["name"], key)))
            with open(keyring, "wb") as handle:
                handle.write(key.encode() if isinstance(key, str) else key)
            os.chmod(keyring, 0o644)
            texts.append(source_text(family, repository, keyring, codename))
        with open(os.path.join(work, "probe.sources"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(texts))
        options = apt_probe_options(work)
        rc, stdout, stderr = run(["apt-get", "-q"] + options + ["update"])
        if rc != 0:
            errors = [line for line in (stdout + "\n" + stderr).splitlines() if line.startswith(("E:", "W:", "Err:"))]
            return None, f"APT cannot read {describe(repositories, codename)}: {' '.join(errors) or stderr.strip()}"
        rc, stdout, stderr = run(["apt-cache"] + options + ["madison"] + list(names))
        if rc != 0:
            return None, f"apt-cache madison exited with code {rc}: {(stderr or stdout).strip()}"
        return parse_madison(stdout), None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def describe(repositories, codename):
    return "; ".join(f"{repository['url']} (suites {' '.join(suites(repository, codename))}, components "
                     f"{' '.join(repository.get('components') or []) or 'none'})" for repository in repositories)


# ------------------------------------------------------------------ holds


def parse_holds(text, family):
    """Held package names: ``apt-mark showhold`` prints names; ``dnf versionlock list`` prints name-[epoch:]version-release.arch."""
    return list(parse_locks(text, family))


def parse_locks(text, family):
    """Held packages as {name: locked version or None}: APT holds a name, DNF locks name-[epoch:]version-release."""
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if family != "RedHat":
        return dict.fromkeys(names)
    locks = {}
    for entry in names:
        match = re.match(r"^(\S+?)-(?:[0-9]+:)?([0-9][^-\s]*-[^\s]*?)(?:\.\*)?$", entry)
        if match:
            locks[match.group(1)] = match.group(2)
    return locks


def hold_changes(family, hold, unhold, locks):
    """{names, commands}: what changes and the argv lists that hold ``hold`` ("name" or "name=version") and release ``unhold``,
    given the held packages ({name: locked version or None}, or a list of names); no commands when nothing changes.

    DNF locks a version: a package locked at another version than the one asked is released and locked again."""
    locks = locks if isinstance(locks, dict) else dict.fromkeys(locks)
    to_hold, relock = [], []
    for request in hold:
        name, version = split_request(request)
        if name not in locks:
            to_hold.append(request)
        elif family == "RedHat" and version and not version_matches(locks[name] or "", version):
            to_hold.append(request)
            relock.append(name)
    to_release = [name for name in unhold if name in locks] + relock
    commands = []
    if family == "RedHat":
        if to_release:
            commands.append(["dnf", "--quiet", "versionlock", "delete"] + to_release)
        if to_hold:
            commands.append(["dnf", "--quiet", "versionlock", "add"]
                            + [name + (f"-{version}" if version else "") for name, version in map(split_request, to_hold)])
    else:
        if to_release:
            commands.append(["apt-mark", "unhold"] + to_release)
        if to_hold:
            commands.append(["apt-mark", "hold"] + [split_request(request)[0] for request in to_hold])
    return {"names": [split_request(request)[0] for request in to_hold] + [name for name in to_release if name not in relock], "commands": commands}


# ------------------------------------------------------------------ version pins (APT)
# apt-mark hold keeps a package where it is; a pin also names the version APT must choose for it (apt_preferences(5):
# a priority over 1000 installs that version even as a downgrade), so that a hold at a version locks what DNF's
# versionlock locks. One file per including role, one stanza per package, written only from what the role holds.

PIN_PRIORITY = 1001
PIN_HEADER = "# Written by the onprem.gpu collection (package_source): the versions this role installed and holds."
# Debian Policy, "Control files and their fields" (Source, Package, Version): names of two or more characters, and an
# upstream version that starts with a digit, after an optional epoch "N:".
_DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_DEBIAN_VERSION = re.compile(r"^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*$")


def preferences_path(role):
    """The APT preferences file of an including role's pins (apt_preferences(5) reads *.pref files in preferences.d)."""
    return f"/etc/apt/preferences.d/onprem-gpu-{role}.pref"


def hold_problems(hold, unhold):
    """Problems of APT hold and release requests, each one sentence: nothing is held, released or pinned while there is one."""
    problems, versions = [], {}
    for name, version in map(split_request, hold):
        problems += _package_name_problems(name)
        if version is not None and not _DEBIAN_VERSION.fullmatch(version):
            problems.append(f"The version {version!r} of {name} is not a Debian version (an optional epoch 'N:', then a digit, then letters, "
                            "digits, '.', '+', '~' or '-'; no spaces).")
        if version is not None and versions.setdefault(name, version) != version:
            problems.append(f"The package {name} is to be held at two versions ({versions[name]} and {version}); hold it at one.")
    for name in unhold:
        problems += _package_name_problems(name)
        if name in {split_request(request)[0] for request in hold}:
            problems.append(f"The package {name} is to be both held and released; ask for one of them.")
    return problems


def _package_name_problems(name):
    if _DEBIAN_PACKAGE.fullmatch(name):
        return []
    return [f"The package name {name!r} is not a Debian package name (two or more lower-case letters, digits, '+', '-' or '.', "
            "starting with a letter or digit)."]


def pin_pattern(version):
    """The ``Pin: version`` of a hold at ``version``, matched as version_matches means it.

    A version with a Debian revision (2.19.6-1+cuda13.2) is pinned exactly; an upstream version (1.35.4) with any
    revision of it (1.35.4-*, a glob apt_preferences(5) allows). APT compares the whole version, epoch included: a
    package with an epoch needs it in the version asked (2:1.18.0).
    """
    return version if "-" in version else f"{version}-*"


def parse_pins(text):
    """{package: pinned version pattern} of a preferences file that this module wrote; comments and other stanzas are ignored."""
    pins = {}
    for stanza in re.split(r"\n[ \t]*\n", text or ""):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith("#"))
        package, pin = fields.get("Package", "").strip(), fields.get("Pin", "").strip()
        if package and pin.startswith("version "):
            pins[package] = pin[len("version "):].strip()
    return pins


def pins_after(pins, hold, unhold, locks):
    """The role's pins after holding ``hold`` and releasing ``unhold``, given its pins and the packages held now (``locks``).

    A hold at a version pins that version; a hold by name alone keeps the name's pin as it is; a pin stays only while its
    package is held, so a released package (``unhold``, or removed by the package manager, which drops its hold) loses it.
    """
    held = (set(locks) - set(unhold)) | {split_request(request)[0] for request in hold}
    after = {name: pattern for name, pattern in pins.items() if name in held}
    after.update({name: pin_pattern(version) for name, version in map(split_request, hold) if version})
    return after


def role_pins_file(holds, role):
    """{path, text} of the preferences file once a role holds ``holds`` ("name=version"; a name alone is not pinned)."""
    pins = {name: pin_pattern(version) for name, version in map(split_request, holds) if version}
    return {"path": preferences_path(role), "text": pins_text(pins)}


def pins_text(pins):
    """The preferences file of a role's pins, one stanza per package in name order; None when there is none (no file)."""
    if not pins:
        return None
    stanzas = [f"Package: {name}\nPin: version {pins[name]}\nPin-Priority: {PIN_PRIORITY}\n" for name in sorted(pins)]
    return PIN_HEADER + "\n" + "\n".join(stanzas)
