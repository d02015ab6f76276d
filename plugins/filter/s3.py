# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._s3 import mc_host_url


def mc_host(endpoint, access_key, secret_key):
    """The MinIO client's MC_HOST_<alias> value for the site's S3 endpoint and keys (keep the result out of logs)."""
    if not all(isinstance(value, str) for value in (endpoint, access_key, secret_key)):
        raise AnsibleFilterError("mc_host takes the S3 endpoint, the access key and the secret key as strings")
    try:
        return mc_host_url(endpoint, access_key, secret_key)
    except ValueError as error:
        raise AnsibleFilterError(f"mc_host: {error}") from None


class FilterModule:
    """The site's S3 endpoint as the MinIO client takes it (nvme_cache's datasets, etcd_backup's copies)."""

    def filters(self):
        return {"mc_host": mc_host}
