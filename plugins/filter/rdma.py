# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._rdma_rails import (
    firmware_changes,
    management_interfaces,
    nccl_settings,
    openibd_action,
    preflight_problems,
    rail_problems,
    resolve_rails,
    role_files,
    verify_problems,
)


def rdma_preflight_problems(settings):
    """One sentence per refused setting of the rdma role; empty when it may go on."""
    return preflight_problems(settings)


def rdma_rails(settings, ports):
    """Each rail with its netdev, RDMA device, address, routing table and rule priority."""
    return resolve_rails(settings, ports)


def rdma_files(rails, settings):
    """The files the rdma role writes once the rails are found, with their templates, modes and kinds."""
    return role_files(rails, settings)


def rdma_rail_problems(rails, ports, host, management, allow_management_change=False):
    """One sentence per rail the driver does not list or that carries the Ansible connection."""
    return rail_problems(rails, ports, host, management, allow_management_change)


def rdma_verify_problems(rails, ports, qos, settings, unit=None):
    """One sentence per rail that is not ready, for a boot unit not enabled and run, and for differing GID indexes."""
    return verify_problems(rails, ports, qos, settings, unit)


def rdma_nccl(rails, ports, ethernet, tos):
    """The GID index, traffic class and RDMA devices NCCL needs."""
    return nccl_settings(rails, ports, ethernet, tos)


def rdma_firmware_changes(firmware, wanted):
    """PCI address -> the PARAM=value pairs whose next-boot value differs."""
    return firmware_changes(firmware, wanted)


def rdma_openibd_action(drivers, allow_reboot=False):
    """restart, reboot or pending: how a new DOCA-OFED driver may be loaded, with the reason."""
    return openibd_action(drivers, allow_reboot)


def rdma_management_interfaces(facts, ansible_host=""):
    """The interfaces the Ansible connection may use."""
    return management_interfaces(facts, ansible_host)


class FilterModule:
    """Filters of the rdma role: refusals, rails, NCCL settings, firmware changes and the driver reload decision."""

    def filters(self):
        return {
            "rdma_preflight_problems": rdma_preflight_problems,
            "rdma_rails": rdma_rails,
            "rdma_files": rdma_files,
            "rdma_rail_problems": rdma_rail_problems,
            "rdma_verify_problems": rdma_verify_problems,
            "rdma_nccl": rdma_nccl,
            "rdma_firmware_changes": rdma_firmware_changes,
            "rdma_openibd_action": rdma_openibd_action,
            "rdma_management_interfaces": rdma_management_interfaces,
        }
