# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The site's S3 endpoint as the MinIO client (mc) takes it: the NVMe cache's datasets come from it (nvme_cache), etcd
snapshots go to it (etcd_backup). mc reads an alias's endpoint and keys from the environment variable ``MC_HOST_<alias>``
(minio/mc, "mc alias" and "MC_HOST_<alias>"), so the keys are never on a command line nor in mc's configuration."""

from __future__ import annotations

from urllib.parse import quote, urlsplit


def mc_host_url(endpoint, access_key, secret_key):
    """minio/mc's ``MC_HOST_<alias>`` value for an S3 endpoint (``https://host[:port]``): the keys percent-encoded in the URL's
    user part, ``/`` too, as mc's parser needs."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        raise ValueError(f"the S3 endpoint must be http(s)://HOST[:PORT], not {endpoint!r}")
    return f"{parts.scheme}://{quote(access_key, safe='')}:{quote(secret_key, safe='')}@{parts.netloc}"
