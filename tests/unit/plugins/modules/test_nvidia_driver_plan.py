# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import io
from unittest import mock

import pytest

from ansible_collections.onprem.gpu.plugins.modules import nvidia_driver_plan

URL = "https://lab-mirror-gone.onprem-gpu.invalid:8080/onprem-gpu-lab.asc"
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"


@pytest.mark.parametrize("response, info, key, problem", [
    (io.BytesIO(KEY.encode()), {"status": 200}, KEY, None),
    (io.BytesIO(b"<html>not found</html>"), {"status": 404}, None, "answered HTTP 404 with no ASCII-armored signing key"),
    (io.BytesIO(b"<html></html>"), {"status": 200}, None, "answered HTTP 200 with no ASCII-armored signing key"),
    (None, {"status": -1, "msg": "Request failed: <urlopen error [Errno -2] Name or service not known>"}, None,
     "is unreachable (Request failed: <urlopen error [Errno -2] Name or service not known>)"),
], ids=["key", "http-404", "no-key", "unreachable"])
def test_fetch_key(response, info, key, problem):
    with mock.patch.object(nvidia_driver_plan, "fetch_url", return_value=(response, info)):
        found, sentence = nvidia_driver_plan.fetch_key(mock.Mock(), {"name": "cuda", "key_url": URL})
    assert found == key
    if problem is None:
        assert sentence is None
    else:
        assert sentence == (f"It cannot use the driver repository: {URL} {problem}; check nvidia_driver_repo_url and nvidia_driver_repo_key_url, "
                            "that the mirror is up, and the network path (DNS, proxy, firewall) from this host to it.")
