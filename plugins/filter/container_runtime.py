# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._container_runtime import (
    cdi_problems,
    offers_plan,
    preflight_problems,
    running_problems,
)


def _mapping(value, what, filter_name):
    if not isinstance(value, dict):
        raise AnsibleFilterError(f"{filter_name} expects {what} as a mapping, not {type(value).__name__}.")
    return value


def container_runtime_preflight(state, settings):
    """The problems found before any change (platform, containerd's source, signing keys)."""
    return preflight_problems(_mapping(state, "container_runtime_facts' container_runtime", "container_runtime_preflight"),
                              _mapping(settings, "the role's settings", "container_runtime_preflight"))


def container_runtime_offers(state, settings):
    """What the package sources offer, judged: problems, the containerd that will run, what to install and hold."""
    return offers_plan(_mapping(state, "container_runtime_facts' container_runtime", "container_runtime_offers"),
                       _mapping(settings, "the role's settings", "container_runtime_offers"))


def container_runtime_cdi(state, host):
    """How the CDI devices differ from the GPUs and their MIG devices; [] when they agree."""
    return cdi_problems(_mapping(state, "container_runtime_facts' container_runtime", "container_runtime_cdi"), host)


def container_runtime_verify(state, settings):
    """The problems of the running container runtime; parses the TOML of `containerd config dump` (version 2 or 3)."""
    return running_problems(_mapping(state, "container_runtime_facts' container_runtime", "container_runtime_verify"),
                            _mapping(settings, "the role's settings", "container_runtime_verify"))


class FilterModule:
    """Judgements of the container_runtime role on what container_runtime_facts reads."""

    def filters(self):
        return {
            "container_runtime_preflight": container_runtime_preflight,
            "container_runtime_offers": container_runtime_offers,
            "container_runtime_cdi": container_runtime_cdi,
            "container_runtime_verify": container_runtime_verify,
        }
