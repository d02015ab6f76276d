# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"
LAB = {"name": "onprem-gpu-lab", "url": "http://lab-mirror.onprem-gpu.internal:8080", "suites": ["bookworm"], "components": ["main"],
       "key_url": "https://lab-mirror.onprem-gpu.internal/onprem-gpu-lab.asc"}
# Recorded from `apt-cache madison nvidia-container-toolkit kubeadm` against the lab mirror and Debian 12.
MADISON = """nvidia-container-toolkit |     1.18.0-1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
nvidia-container-toolkit |     1.17.8-1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
   kubeadm | 1.35.4-1.1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
"""


def test_the_lab_source_is_one_text_for_every_role():
    text = source.source_text("Debian", LAB, "/etc/apt/keyrings/onprem-gpu-lab.asc", "bookworm")
    assert text == ("# Managed by onprem.gpu: local changes are overwritten.\nTypes: deb\nURIs: http://lab-mirror.onprem-gpu.internal:8080\n"
                    "Suites: bookworm\nComponents: main\nSigned-By: /etc/apt/keyrings/onprem-gpu-lab.asc\n")


def test_a_flat_repository_has_no_components_and_empty_suites_take_the_codename():
    flat = dict(LAB, suites=["/"], components=[])
    assert "Components" not in source.source_text("Debian", flat, "/k.asc", "bookworm")
    assert "Suites: noble\n" in source.source_text("Debian", dict(LAB, suites=[]), "/k.asc", "noble")


def test_el_writes_a_repo_file_whose_key_is_a_file_url():
    text = source.source_text("RedHat", LAB, "/etc/pki/rpm-gpg/onprem-gpu-lab.asc", "")
    assert text.splitlines()[1:] == ["[onprem-gpu-lab]", "name=onprem-gpu-lab (managed by onprem.gpu)", f"baseurl={LAB['url']}", "enabled=1",
                                     "gpgcheck=1", "gpgkey=file:///etc/pki/rpm-gpg/onprem-gpu-lab.asc"]


def test_desired_files_name_the_keyring_by_the_key_format():
    files = source.desired_files("Debian", [LAB, dict(LAB, name="binary")], {"onprem-gpu-lab": KEY, "binary": b"\x99\x01\x0d"}, "bookworm")
    assert set(files) == {"/etc/apt/keyrings/onprem-gpu-lab.asc", "/etc/apt/sources.list.d/onprem-gpu-lab.sources",
                          "/etc/apt/keyrings/binary.gpg", "/etc/apt/sources.list.d/binary.sources"}
    assert "Signed-By: /etc/apt/keyrings/binary.gpg" in files["/etc/apt/sources.list.d/binary.sources"]
    assert set(source.desired_files("RedHat", [LAB], {"onprem-gpu-lab": KEY}, "")) == {
        "/etc/pki/rpm-gpg/onprem-gpu-lab.asc", "/etc/yum.repos.d/onprem-gpu-lab.repo"}


@pytest.mark.parametrize("parents, allowed", [
    (["onprem.gpu.kube_node"], True), (["rdma"], True), (["onprem.gpu.nvidia_driver", "site"], True), ([], False), (["my.own.role"], False),
])
def test_only_the_collections_roles_may_include_it(parents, allowed):
    problem = source.caller_problem(parents)
    assert (problem is None) is allowed
    if not allowed:
        assert problem.startswith("onprem.gpu.package_source is internal to the onprem.gpu collection")


def test_input_problems_name_each_bad_repository():
    assert source.input_problems([LAB, dict(LAB)]) == []
    problems = source.input_problems([dict(LAB, name="a b"), dict(LAB, key_url=""), dict(LAB, url="http://other")])
    assert problems == [
        "The repository name 'a b' is not a file name (letters, digits, '.', '_', '-').",
        f"The repository onprem-gpu-lab needs both a URL and the URL of the key that signs it (got url '{LAB['url']}', key_url '').",
        "The repository onprem-gpu-lab is given twice with different settings: one name is one file, so give each repository its own name "
        "or the same URL, suites, components and key.",
    ]


@pytest.mark.parametrize("answer, problem", [
    ({"status": 200, "content": KEY}, None),
    ({"status": 404, "content": b"not found"}, "answered HTTP 404 with no signing key"),
    ({"status": -1, "msg": "Connection refused"}, "is unreachable (Connection refused)"),
])
def test_key_problem(answer, problem):
    assert source.key_problem(answer) == problem


def test_judge_offers_matches_upstream_versions_and_names_what_is_missing():
    offers = source.parse_madison(MADISON)
    assert offers[2] == ("kubeadm", "1.35.4-1.1")
    judged = source.judge_offers(offers, ["nvidia-container-toolkit=1.18.0", "kubeadm=1.35.4", "kubeadm=1.35", "kubectl", "libnvidia-container1"])
    assert judged["missing"] == ["kubeadm=1.35", "kubectl", "libnvidia-container1"]
    assert judged["offered"] == {"nvidia-container-toolkit": ["1.18.0-1", "1.17.8-1"], "kubeadm": ["1.35.4-1.1"], "kubectl": [],
                                 "libnvidia-container1": []}
    assert source.version_matches("2:1.18.0-1", "1.18.0") and not source.version_matches("1.18.01-1", "1.18.0")


def test_parse_dnf_list():
    text = ("Available Packages\nnvidia-driver-cuda.x86_64      3:580.65.06-1.el9     onprem-gpu-probe\n"
            "kmod-nvidia-open-dkms.noarch   580.65.06-1.el9       onprem-gpu-probe\n")
    assert source.parse_dnf_list(text) == [("nvidia-driver-cuda", "580.65.06-1.el9"), ("kmod-nvidia-open-dkms", "580.65.06-1.el9")]


class FakeApt:
    """Records the argv lists and answers as APT would; checks the private configuration it is given."""

    def __init__(self, update_rc=0, update_err=""):
        self.calls, self.update_rc, self.update_err, self.probe = [], update_rc, update_err, None

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[-1] == "update":
            work = [value for value in argv if value.startswith("Dir::Etc::SourceList=")][0].split("=", 1)[1]
            with open(work, encoding="utf-8") as handle:
                self.probe = handle.read()
            assert os.path.exists(os.path.join(os.path.dirname(work), "onprem-gpu-lab.asc"))
            return self.update_rc, "", self.update_err
        assert argv[0] == "apt-cache" and "Dir::Etc::SourceParts=-" in argv
        return 0, MADISON, ""


def test_repository_offers_reads_only_the_repositories_through_a_private_configuration():
    apt = FakeApt()
    offers, problem = source.repository_offers(apt, "Debian", [LAB], {"onprem-gpu-lab": KEY}, "bookworm", ["kubeadm"])
    assert problem is None and ("kubeadm", "1.35.4-1.1") in offers
    assert "Dir::Etc::SourceParts=-" in apt.calls[0] and apt.calls[1][-2:] == ["madison", "kubeadm"]
    assert apt.probe.startswith("# Managed by onprem.gpu") and "Signed-By: /tmp/" in apt.probe
    work = os.path.dirname(apt.probe.split("Signed-By: ")[1].strip())
    assert not os.path.exists(work)


def test_repository_offers_names_the_repository_apt_cannot_read():
    apt = FakeApt(update_rc=100, update_err="Err:1 http://lab-mirror bookworm InRelease\n  Could not resolve host\nE: Some index files failed\n")
    offers, problem = source.repository_offers(apt, "Debian", [LAB], {"onprem-gpu-lab": KEY}, "bookworm", ["kubeadm"])
    assert offers is None
    assert problem == ("APT cannot read http://lab-mirror.onprem-gpu.internal:8080 (suites bookworm, components main): "
                       "Err:1 http://lab-mirror bookworm InRelease E: Some index files failed")


def test_nothing_asked_runs_nothing():
    assert source.repository_offers(None, "Debian", [LAB], {}, "bookworm", []) == ([], None)


def test_hold_changes_hold_only_what_is_not_held_and_release_only_what_is():
    assert source.hold_changes("Debian", ["kubelet", "kubeadm=1.35.4"], [], ["kubelet"]) == {
        "names": ["kubeadm"], "commands": [["apt-mark", "hold", "kubeadm"]]}
    assert source.hold_changes("Debian", ["kubelet"], ["nccl-tests", "other"], ["kubelet", "nccl-tests"]) == {
        "names": ["nccl-tests"], "commands": [["apt-mark", "unhold", "nccl-tests"]]}
    assert source.hold_changes("RedHat", ["nvidia-driver-cuda=580.65.06"], ["old"], source.parse_holds("old-0:1.0-1.el9.*\n", "RedHat")) == {
        "names": ["nvidia-driver-cuda", "old"],
        "commands": [["dnf", "--quiet", "versionlock", "delete", "old"], ["dnf", "--quiet", "versionlock", "add", "nvidia-driver-cuda-580.65.06"]]}
    assert source.hold_changes("Debian", ["kubelet"], [], ["kubelet"])["commands"] == []


def test_dnf_relocks_a_package_locked_at_another_version():
    locks = source.parse_locks("Last metadata expiration check: 0:01:00 ago.\nnvidia-driver-cuda-3:570.172.08-1.el9.*\n"
                               "kmod-nvidia-open-dkms-580.65.06-1.el9.*\n", "RedHat")
    assert locks == {"nvidia-driver-cuda": "570.172.08-1.el9", "kmod-nvidia-open-dkms": "580.65.06-1.el9"}
    changes = source.hold_changes("RedHat", ["nvidia-driver-cuda=580.65.06", "kmod-nvidia-open-dkms=580.65.06"], [], locks)
    assert changes == {"names": ["nvidia-driver-cuda"], "commands": [
        ["dnf", "--quiet", "versionlock", "delete", "nvidia-driver-cuda"], ["dnf", "--quiet", "versionlock", "add", "nvidia-driver-cuda-580.65.06"]]}


# ---------------------------------------------------------------- version pins (APT)

KUBE_PINS = """# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.
Package: kubeadm
Pin: version 1.35.4-*
Pin-Priority: 1001

Package: kubectl
Pin: version 1.35.4-*
Pin-Priority: 1001

Package: kubelet
Pin: version 1.35.4-*
Pin-Priority: 1001
"""


@pytest.mark.parametrize("parents, role", [
    (["onprem.gpu.kube_node"], "kube_node"),
    (["kube_node", "onprem.gpu.kube_control_plane"], "kube_node"),
    (["site_local", "onprem.gpu.nccl_tests", "onprem.gpu.nvidia_driver"], "nccl_tests"),
    (["my.own.role"], None),
    (None, None),
])
def test_the_including_role_is_the_innermost_of_the_collections_roles(parents, role):
    assert source.including_role(parents) == role


def test_each_role_has_its_own_preferences_file():
    assert source.preferences_path("kube_node") == "/etc/apt/preferences.d/onprem-gpu-kube_node.pref"


@pytest.mark.parametrize("version, pattern", [
    ("1.35.4", "1.35.4-*"),  # an upstream version: any Debian revision of it, as version_matches means
    ("2.19.6-1+cuda13.2", "2.19.6-1+cuda13.2"),  # a version with its revision: exactly that one
    ("2:1.18.0", "2:1.18.0-*"),  # APT compares the epoch too
])
def test_pin_pattern(version, pattern):
    assert source.pin_pattern(version) == pattern


def test_pins_text_is_one_sorted_stanza_per_package_and_parses_back():
    pins = {"kubelet": "1.35.4-*", "kubectl": "1.35.4-*", "kubeadm": "1.35.4-*"}
    assert source.pins_text(pins) == KUBE_PINS
    assert source.parse_pins(KUBE_PINS) == pins
    assert source.pins_text({}) is None
    assert source.parse_pins(None) == {} and source.parse_pins("") == {}


def test_parse_pins_skips_comments_and_stanzas_that_pin_no_version():
    text = "# a comment: with a colon\nPackage: *\nPin: release a=stable\nPin-Priority: 500\n\n \nPackage: nccl-tests\nPin: version 2.19.6-1+cuda13.2\n"
    assert source.parse_pins(text) == {"nccl-tests": "2.19.6-1+cuda13.2"}


def test_a_hold_at_a_version_adds_or_moves_its_pin():
    locks = dict.fromkeys(["kubelet", "kubeadm", "kubectl"])
    assert source.pins_after({}, ["kubelet=1.35.4", "kubeadm=1.35.4", "kubectl=1.35.4"], [], {}) == source.parse_pins(KUBE_PINS)
    moved = source.pins_after(source.parse_pins(KUBE_PINS), ["kubelet=1.36.2", "kubeadm=1.36.2", "kubectl=1.36.2"], [], locks)
    assert moved == {"kubeadm": "1.36.2-*", "kubectl": "1.36.2-*", "kubelet": "1.36.2-*"}
    # A partial hold list (the packages not held yet) leaves the other pins alone.
    assert source.pins_after({"nvidia-modprobe": "580.65.06-*"}, ["nvidia-fabricmanager=580.65.06"], [], {"nvidia-modprobe": None}) == {
        "nvidia-modprobe": "580.65.06-*", "nvidia-fabricmanager": "580.65.06-*"}


def test_a_hold_by_name_alone_keeps_the_pin_it_has_and_adds_none():
    pins = source.parse_pins(KUBE_PINS)
    assert source.pins_after(pins, ["kubelet", "kubeadm", "kubectl"], [], dict.fromkeys(pins)) == pins
    assert source.pins_after({}, ["kubelet"], [], {}) == {}


def test_a_released_or_removed_package_loses_its_pin_and_the_last_one_leaves_no_file():
    pins = {"nccl-tests": "2.19.6-1+cuda13.2"}
    assert source.pins_after(pins, [], ["nccl-tests"], {"nccl-tests": None}) == {}
    assert source.pins_text(source.pins_after(pins, [], ["nccl-tests"], {"nccl-tests": None})) is None
    # The 570 branch's Fabric Manager was removed (its hold went with it) before the 580 packages are held.
    before = {"nvidia-fabricmanager-570": "570.172.08-*", "nvidia-modprobe": "570.172.08-*"}
    after = source.pins_after(before, ["nvidia-modprobe=580.65.06", "nvidia-fabricmanager=580.65.06"], [], {"nvidia-modprobe": None})
    assert after == {"nvidia-modprobe": "580.65.06-*", "nvidia-fabricmanager": "580.65.06-*"}


def test_hold_problems_name_each_bad_request_in_one_sentence():
    assert source.hold_problems(["kubelet=1.35.4", "nccl-tests=2.19.6-1+cuda13.2", "libnvidia-container1", "g++-12=12.2.0-14"],
                                ["nvidia-kernel-dkms"]) == []
    assert source.hold_problems(["kubelet=1.35.4 ", "kubeadm=1.35.4\nPin-Priority: -1", "Kubectl=1.35.4", "nccl_tests"], ["a b", "x"]) == [
        "The version '1.35.4 ' of kubelet is not a Debian version (an optional epoch 'N:', then a digit, then letters, digits, '.', '+', "
        "'~' or '-'; no spaces).",
        "The version '1.35.4\\nPin-Priority: -1' of kubeadm is not a Debian version (an optional epoch 'N:', then a digit, then letters, "
        "digits, '.', '+', '~' or '-'; no spaces).",
        "The package name 'Kubectl' is not a Debian package name (two or more lower-case letters, digits, '+', '-' or '.', starting with "
        "a letter or digit).",
        "The package name 'nccl_tests' is not a Debian package name (two or more lower-case letters, digits, '+', '-' or '.', starting "
        "with a letter or digit).",
        "The package name 'a b' is not a Debian package name (two or more lower-case letters, digits, '+', '-' or '.', starting with a "
        "letter or digit).",
        "The package name 'x' is not a Debian package name (two or more lower-case letters, digits, '+', '-' or '.', starting with a "
        "letter or digit).",
    ]


def test_hold_problems_refuse_two_versions_of_one_package_and_a_hold_that_is_also_a_release():
    assert source.hold_problems(["kubelet=1.35.4", "kubelet=1.36.2"], ["kubelet"]) == [
        "The package kubelet is to be held at two versions (1.35.4 and 1.36.2); hold it at one.",
        "The package kubelet is to be both held and released; ask for one of them."]
    assert source.hold_problems(["kubelet=1.35.4", "kubelet"], []) == []


def test_unsatisfied_requests_are_those_not_installed_and_offered_at_their_version():
    packages = {
        "containerd": {"installed": "1.6.20~ds1-1+b1", "candidate": "1.6.20~ds1-1+b1", "offered": ["1.6.20~ds1-1+b1"]},
        "nvidia-container-toolkit": {"installed": "1.18.0-1", "candidate": "1.18.0-1", "offered": ["1.18.0-1", "1.17.8-1"]},
        "kubelet": {"installed": "1.35.4-1.1", "candidate": "1.35.4-1.1", "offered": []},
        "libnvidia-container1": {"installed": None, "candidate": "1.18.0-1", "offered": ["1.18.0-1"]},
    }
    requests = [("containerd", None), ("nvidia-container-toolkit", "1.18.0"), ("nvidia-container-toolkit", "1.17.8"),
                ("nvidia-container-toolkit", "1.18"), ("kubelet", "1.35.4"), ("libnvidia-container1", "1.18.0"), ("runc", None)]
    assert source.unsatisfied_requests(packages, requests) == [
        ("nvidia-container-toolkit", "1.17.8"),  # installed at another version
        ("nvidia-container-toolkit", "1.18"),    # 1.18 is not 1.18.0
        ("kubelet", "1.35.4"),                   # installed, but the lists offer nothing (emptied lists)
        ("libnvidia-container1", "1.18.0"),      # not installed
        ("runc", None),                          # unknown to the lists
    ]


# ------------------------------------------------------------------ trusting a signing key (fixtures made with gpg --export)
KEYS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "package_source")
KEY_A = "B0E1ED7F88D09104087FDC904DBD77E25E55600E"
KEY_B = "8F53F722848DFDB3838E092F3800126024EE03A3"


def fixture(name):
    with open(os.path.join(KEYS, name), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("name, fingerprints", [("key-a.asc", [KEY_A]), ("key-a.gpg", [KEY_A]), ("keys-a-and-b.asc", [KEY_A, KEY_B])])
def test_key_fingerprints_are_those_gpg_shows(name, fingerprints):
    assert source.key_fingerprints(fixture(name)) == fingerprints
    assert source.key_fingerprints(fixture(name).decode("latin-1") if name.endswith(".asc") else fixture(name)) == fingerprints


@pytest.mark.parametrize("content", [b"", b"<html>not found</html>", KEY, b"\x99\xff\xff"])
def test_no_key_has_no_fingerprint(content):
    assert source.key_fingerprints(content) == []


@pytest.mark.parametrize("key_url, pin, problem", [
    ("https://mirror/key.asc", "", None),
    ("http://mirror/key.asc", KEY_A, None),
    ("http://mirror/key.asc", "", "The repository lab takes its signing key from http://mirror/key.asc over plain HTTP with no key_fingerprint, so "
     "anything on the network path could hand over another key and get packages installed as root on every node: pin the key's fingerprint "
     "(the role's *_repo_key_fingerprint, or onprem_gpu_mirror_key_fingerprint for the site's mirror) or serve the key over https://."),
    ("ftp://mirror/key.asc", "", "The key URL 'ftp://mirror/key.asc' of the repository lab must be an https:// URL, or an http:// one with the "
     "key's fingerprint pinned (key_fingerprint)."),
    ("https://mirror/key.asc", "3BF863CC", "The key_fingerprint of the repository lab must be the full OpenPGP fingerprint of the key"),
], ids=["https", "http-pinned", "http-unpinned", "ftp", "short-id"])
def test_key_url_problem(key_url, pin, problem):
    found = source.key_url_problem({"name": "lab", "key_url": key_url, "key_fingerprint": pin})
    assert found == problem if problem is None else found.startswith(problem)


def test_an_unpinned_http_key_is_refused_before_anything_is_fetched():
    problems = source.input_problems([dict(LAB, key_url="http://mirror/key.asc")])
    assert problems == [source.key_url_problem(dict(LAB, key_url="http://mirror/key.asc"))]


@pytest.mark.parametrize("name, pin, carried", [
    ("key-a.asc", KEY_A, None), ("key-a.gpg", KEY_A.lower(), None),
    ("key-a.asc", KEY_B, f"carries the key {KEY_A}"),
    # A file with the pinned key and another: APT would trust both, so it is refused.
    ("keys-a-and-b.asc", KEY_A, f"carries the key {KEY_A}, {KEY_B}"),
])
def test_key_pin_problem(name, pin, carried):
    problem = source.key_pin_problem({"name": "lab", "key_url": "http://mirror/key.asc", "key_fingerprint": pin}, fixture(name))
    if carried is None:
        assert problem is None
    else:
        assert problem == (f"The signing key http://mirror/key.asc of the repository lab {carried} where key_fingerprint pins {pin} (and only "
                           "that key): it is not installed; check that the mirror serves the right key and the fingerprint its publisher gives.")


def test_nothing_pinned_is_no_pin_problem():
    assert source.key_pin_problem({"name": "lab", "key_url": "https://mirror/key.asc"}, b"anything") is None
