# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's one offers check: keys fetched, repositories read through a private APT configuration, requests judged."""

from __future__ import annotations

import io
from unittest import mock

from ansible_collections.onprem.gpu.plugins.module_utils import _package_probe as probe_module

KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"
LAB = {"name": "onprem-gpu-lab", "url": "http://lab-mirror.onprem-gpu.internal:8080", "suites": ["bookworm"], "components": ["main"],
       "key_url": "https://lab-mirror.onprem-gpu.internal/onprem-gpu-lab.asc"}
# Recorded from `apt-cache madison kubeadm kubelet` against the lab mirror and Debian 12.
MADISON = """   kubeadm | 1.36.2-1.1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
   kubeadm | 1.35.4-1.1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
   kubelet | 1.36.2-1.1 | http://lab-mirror.onprem-gpu.internal:8080 bookworm/main amd64 Packages
"""


class FakeModule:
    """An AnsibleModule as far as the probe uses it: run_command answers as APT does."""

    def __init__(self, update_rc=0):
        self.calls, self.update_rc = [], update_rc

    def run_command(self, argv, environ_update=None):
        assert environ_update["LC_ALL"] == "C"
        self.calls.append(argv)
        if argv[-1] == "update":
            return self.update_rc, "", "E: The repository 'http://lab-mirror.onprem-gpu.internal:8080 bookworm Release' is not signed."
        return 0, MADISON, ""


def answer(status, content=b"", msg="OK"):
    def fetch_url(module, url, timeout):
        assert timeout == 30
        return (io.BytesIO(content) if status == 200 else None), {"status": status, "msg": msg}
    return fetch_url


def test_every_request_offered_is_no_problem_and_the_versions_are_listed():
    module = FakeModule()
    with mock.patch.object(probe_module, "fetch_url", side_effect=answer(200, KEY)):
        result = probe_module.probe(module, "Debian", "bookworm", [LAB], ["kubeadm=1.35.4", "kubelet"])
    assert result["problems"] == [] and result["missing"] == []
    assert result["offered"] == {"kubeadm": ["1.36.2-1.1", "1.35.4-1.1"], "kubelet": ["1.36.2-1.1"]}
    assert result["keys"][0]["content"] == KEY and result["keys"][0]["problem"] is None
    # APT reads only the probe's sources, never the host's.
    assert all("Dir::Etc::SourceParts=-" in argv for argv in module.calls)


def test_a_version_not_offered_is_missing_with_one_sentence():
    with mock.patch.object(probe_module, "fetch_url", side_effect=answer(200, KEY)):
        result = probe_module.probe(FakeModule(), "Debian", "bookworm", [LAB], ["kubelet=1.35.4", "kubeadm=1.35.4"])
    assert result["missing"] == ["kubelet=1.35.4"]
    assert result["problems"] == ["http://lab-mirror.onprem-gpu.internal:8080 (suites bookworm, components main) offers no kubelet=1.35.4."]


def test_a_key_that_cannot_be_fetched_stops_before_apt_runs():
    module = FakeModule()
    with mock.patch.object(probe_module, "fetch_url", side_effect=answer(404, msg="Not Found")):
        result = probe_module.probe(module, "Debian", "bookworm", [LAB], ["kubeadm"])
    assert module.calls == []
    assert result["keys"][0]["problem"] == "answered HTTP 404 with no signing key"
    assert result["problems"][0].startswith("The onprem-gpu-lab repository cannot be used: its key "
                                            "https://lab-mirror.onprem-gpu.internal/onprem-gpu-lab.asc answered HTTP 404")


def test_a_repository_apt_cannot_read_is_unreadable():
    with mock.patch.object(probe_module, "fetch_url", side_effect=answer(200, KEY)):
        result = probe_module.probe(FakeModule(update_rc=100), "Debian", "bookworm", [LAB], ["kubeadm"])
    assert result["unreadable"].startswith("APT cannot read http://lab-mirror.onprem-gpu.internal:8080 (suites bookworm, components main): E: ")
    assert result["problems"] == [result["unreadable"] + "."] and result["offered"] == {}


class Refused(Exception):
    pass


def refusing_module():
    module = FakeModule()
    module.fail_json = mock.Mock(side_effect=lambda **kwargs: (_never for _never in ()).throw(Refused(kwargs["msg"])))
    return module


def test_an_unpinned_http_key_is_never_fetched():
    fetch = mock.Mock()
    with mock.patch.object(probe_module, "fetch_url", fetch):
        try:
            probe_module.probe(refusing_module(), "Debian", "bookworm", [dict(LAB, key_url="http://mirror/key.asc")], ["kubeadm"])
        except Refused as refusal:
            assert str(refusal).startswith("The repository onprem-gpu-lab takes its signing key from http://mirror/key.asc over plain HTTP")
        else:
            raise AssertionError("not refused")
    fetch.assert_not_called()


def test_a_key_that_is_not_the_pinned_one_is_refused_before_apt_runs():
    module = refusing_module()
    pinned = dict(LAB, key_url="http://mirror/key.asc", key_fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC")
    with mock.patch.object(probe_module, "fetch_url", side_effect=answer(200, KEY)):
        try:
            probe_module.probe(module, "Debian", "bookworm", [pinned], ["kubeadm"])
        except Refused as refusal:
            assert "carries no OpenPGP public key where key_fingerprint pins EB693B3035CD5710E231E123A4B469963BF863CC" in str(refusal)
        else:
            raise AssertionError("not refused")
    assert module.calls == []
