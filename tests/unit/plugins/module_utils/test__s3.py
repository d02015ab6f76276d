# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The MinIO client's MC_HOST_<alias> value, and the filter the roles take it from."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.s3 import FilterModule, mc_host
from ansible_collections.onprem.gpu.plugins.module_utils._s3 import mc_host_url


def test_the_keys_are_percent_encoded_slash_included_and_come_back_whole():
    url = mc_host_url("https://s3.example.internal:9000/", "AKIA/EXAMPLE+KEY", "wJalr/XUtn:FEMI@K7 MDENG")
    assert url == "https://AKIA%2FEXAMPLE%2BKEY:wJalr%2FXUtn%3AFEMI%40K7%20MDENG@s3.example.internal:9000"
    parts = urlsplit(url)
    assert (unquote(parts.username), unquote(parts.password), parts.hostname, parts.port) == (
        "AKIA/EXAMPLE+KEY", "wJalr/XUtn:FEMI@K7 MDENG", "s3.example.internal", 9000)
    # As nvme_cache's MC_HOST was written before this function (urlencode, then '/' as %2F).
    assert mc_host_url("http://s3.lab.invalid:9000", "LABACCESSKEY", "lab/secret+key-4f9c2e") == \
        "http://LABACCESSKEY:lab%2Fsecret%2Bkey-4f9c2e@s3.lab.invalid:9000"


@pytest.mark.parametrize("endpoint", ["s3.example.internal:9000", "ftp://s3", "https://", "https://user:pw@s3.example.internal"])
def test_an_endpoint_that_is_not_http_s_host_port_is_refused(endpoint):
    with pytest.raises(ValueError, match="the S3 endpoint must be http"):
        mc_host_url(endpoint, "a", "b")
    with pytest.raises(AnsibleFilterError, match="mc_host: the S3 endpoint must be"):
        mc_host(endpoint, "a", "b")


def test_the_filter():
    assert FilterModule().filters() == {"mc_host": mc_host}
    with pytest.raises(AnsibleFilterError, match="as strings"):
        mc_host("https://s3", None, "b")
