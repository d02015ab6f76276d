# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.onprem.gpu.plugins.module_utils._mig_config import (
    MigConfigError,
    WantedGpu,
    names_subsystems,
    parse_configs,
    render_export,
    resolve_layout,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mig"


def load_fixture(name):
    return yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))


def gpu(index, name, pci_device_id, mig_capable=True):
    return {"index": index, "name": name, "pci_device_id": pci_device_id, "mig_capable": mig_capable, "uuid": f"GPU-{index}"}


H100_NODE = [gpu(index, "NVIDIA H100 80GB HBM3", "0x233010DE") for index in range(8)]
A100_40GB_NODE = [gpu(index, "NVIDIA A100-SXM4-40GB", "0x20B010DE") for index in range(8)]
MIXED_NODE = [gpu(0, "NVIDIA H100 80GB HBM3", "0x233010DE"), gpu(1, "NVIDIA A30", "0x20B710DE"), gpu(2, "NVIDIA L40S", "0x26B910DE", mig_capable=False)]

BALANCED_80GB = WantedGpu(True, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})


def entry(**fields):
    return {key.replace("_", "-"): value for key, value in fields.items()}


def layouts(**configs):
    return {"version": "v1", "mig-configs": {name.replace("_", "-"): entries for name, entries in configs.items()}}


def test_the_mig_parted_example_config_parses():
    configs = parse_configs(load_fixture("config__mig_parted_example.yaml"))
    assert sorted(configs) == ["all-1g.5gb", "all-2g.10gb", "all-3g.20gb", "all-balanced", "all-disabled", "all-enabled", "custom-config"]
    assert [(entry.devices, entry.mig_enabled, entry.mig_devices) for entry in configs["custom-config"]] == [
        ((0, 1, 2, 3), False, {}),
        ((4,), True, {"1g.5gb": 7}),
        ((5,), True, {"2g.10gb": 3}),
        ((6,), True, {"3g.20gb": 2}),
        ((7,), True, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    ]


def test_the_bare_mig_configs_mapping_is_accepted():
    document = load_fixture("config__mig_parted_example.yaml")
    assert parse_configs(document["mig-configs"]) == parse_configs(document)


@pytest.mark.parametrize(
    "layout, node, expected",
    [
        pytest.param("all-balanced", H100_NODE, {index: BALANCED_80GB for index in range(8)}, id="balanced-on-h100-by-device-filter"),
        pytest.param(
            "all-balanced",
            A100_40GB_NODE,
            {index: WantedGpu(True, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}) for index in range(8)},
            id="balanced-on-a100-40gb",
        ),
        pytest.param("all-1g.10gb", A100_40GB_NODE, {index: WantedGpu(True, {"1g.10gb": 4}) for index in range(8)}, id="1g.10gb-is-4-on-a100-40gb"),
        pytest.param(
            "all-balanced",
            MIXED_NODE,
            {0: BALANCED_80GB, 1: WantedGpu(True, {"1g.6gb": 2, "2g.12gb": 1})},
            id="mixed-node-each-model-its-entry-non-mig-skipped",
        ),
    ],
)
def test_resolve_the_default_config(layout, node, expected):
    configs = parse_configs(load_fixture("config__mig_parted_default_excerpt__assembled.yaml"))
    assert resolve_layout(configs, layout, node) == expected


def test_per_device_mixed_layout():
    configs = parse_configs(load_fixture("config__mig_parted_example.yaml"))
    assert resolve_layout(configs, "custom-config", A100_40GB_NODE) == {
        0: WantedGpu(False, {}),
        1: WantedGpu(False, {}),
        2: WantedGpu(False, {}),
        3: WantedGpu(False, {}),
        4: WantedGpu(True, {"1g.5gb": 7}),
        5: WantedGpu(True, {"2g.10gb": 3}),
        6: WantedGpu(True, {"3g.20gb": 2}),
        7: WantedGpu(True, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
    }


@pytest.mark.parametrize(
    "entries, expected",
    [
        pytest.param(
            [entry(devices="all", mig_enabled=False), entry(devices=[1], mig_enabled=True, mig_devices={"7g.80gb": 1})],
            {0: WantedGpu(False, {}), 1: WantedGpu(True, {"7g.80gb": 1}), 2: WantedGpu(False, {})},
            id="later-entry-wins",
        ),
        pytest.param(
            [entry(devices=[0, 9], device_filter="0x20b010de", mig_enabled=True, mig_devices={}), entry(devices=[1], mig_enabled=True, mig_devices={})],
            {1: WantedGpu(True, {})},
            id="entry-for-another-model-may-name-any-index",
        ),
        pytest.param(
            [entry(devices=[2], device_filter=["0x20B010DE", "0x233010DE"], mig_enabled=True, mig_devices={"1g.10gb": 0, "3g.40gb": 2})],
            {2: WantedGpu(True, {"3g.40gb": 2})},
            id="filter-list-and-zero-counts-dropped",
        ),
        pytest.param([entry(devices="all", mig_enabled=True, mig_devices={})], {index: WantedGpu(True, {}) for index in range(3)}, id="mig-without-instances"),
    ],
)
def test_resolve_entries(entries, expected):
    configs = parse_configs(layouts(custom=entries))
    assert resolve_layout(configs, "custom", H100_NODE[:3]) == expected


def test_an_explicit_non_mig_gpu_may_be_set_to_disabled():
    configs = parse_configs(layouts(off=[entry(devices=[2], mig_enabled=False)]))
    assert resolve_layout(configs, "off", MIXED_NODE) == {}


CONFIG_ERRORS = [
    pytest.param(["all"], "The MIG configuration must be a mapping with the keys version and mig-configs, not a list.", id="not-a-mapping"),
    pytest.param(None, "The MIG configuration must be a mapping with the keys version and mig-configs, not nothing.", id="empty-file"),
    pytest.param({"mig-configs": {}}, "The MIG configuration lacks the version field; mig-parted configurations start with 'version: v1'.", id="no-version"),
    pytest.param({"version": "v2", "mig-configs": {}}, "The MIG configuration has version 'v2', but only v1 is supported.", id="version-v2"),
    pytest.param(
        {"version": "v1", "mig-configs": {}, "hooks": {}},
        "The MIG configuration has the unexpected field 'hooks'; only version and mig-configs are allowed.",
        id="top-level-field",
    ),
    pytest.param({"version": "v1"}, "The MIG configuration defines no layout under mig-configs.", id="no-layouts"),
    pytest.param({"version": "v1", "mig-configs": ["a"]}, "The mig-configs field must map layout names to lists of entries, not a list.", id="configs-list"),
    pytest.param(layouts(a=[]), "Layout 'a' must be a non-empty list of entries, not a list.", id="empty-layout"),
    pytest.param(layouts(a={"devices": "all"}), "Layout 'a' must be a non-empty list of entries, not a mapping.", id="layout-mapping"),
    pytest.param(layouts(a=["all"]), "Entry 1 of layout 'a' must be a mapping, not a string.", id="entry-string"),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=False, gpus=[0])]),
        "Entry 1 of layout 'a' has the unexpected field 'gpus'; the fields are devices, device-filter, mig-enabled and mig-devices.",
        id="entry-field",
    ),
    pytest.param(layouts(a=[entry(mig_enabled=False)]), "Entry 1 of layout 'a' lacks the required field devices.", id="no-devices"),
    pytest.param(layouts(a=[entry(devices="all")]), "Entry 1 of layout 'a' lacks the required field mig-enabled.", id="no-mig-enabled"),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled="yes")]), "Entry 1 of layout 'a' has mig-enabled 'yes'; it must be true or false.", id="mig-enabled-string"
    ),
    pytest.param(
        layouts(a=[entry(devices="some", mig_enabled=False)]),
        "Entry 1 of layout 'a' has devices 'some'; it must be 'all' or a non-empty list of GPU indices.",
        id="devices-word",
    ),
    pytest.param(
        layouts(a=[entry(devices=[0, -1], mig_enabled=False)]),
        "Entry 1 of layout 'a' has devices [0, -1]; it must be 'all' or a non-empty list of GPU indices.",
        id="devices-negative",
    ),
    pytest.param(
        layouts(a=[entry(devices=[True], mig_enabled=False)]),
        "Entry 1 of layout 'a' has devices [True]; it must be 'all' or a non-empty list of GPU indices.",
        id="devices-bool",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=False), entry(devices="all", device_filter="20B0", mig_enabled=False)]),
        "Entry 2 of layout 'a' has device-filter '20B0'; each filter must be a PCI device and vendor id written 0xDDDDVVVV, "
        "such as 0x20B010DE, optionally followed by a subsystem id, such as 0x20B010DE:0x134F10DE.",
        id="device-filter-malformed",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", device_filter=["0x20B010DE:147E10DE"], mig_enabled=False)]),
        "Entry 1 of layout 'a' has device-filter '0x20B010DE:147E10DE'; each filter must be a PCI device and vendor id written "
        "0xDDDDVVVV, such as 0x20B010DE, optionally followed by a subsystem id, such as 0x20B010DE:0x134F10DE.",
        id="device-filter-subsystem-malformed",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True)]),
        "Entry 1 of layout 'a' enables MIG without mig-devices; write 'mig-devices: {}' for MIG mode without instances.",
        id="enabled-without-devices",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=False, mig_devices={"1g.10gb": 1})]),
        "Entry 1 of layout 'a' disables MIG but lists mig-devices.",
        id="disabled-with-devices",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True, mig_devices=["1g.10gb"])]),
        "Entry 1 of layout 'a' has mig-devices ['1g.10gb']; it must map profile names to counts.",
        id="mig-devices-list",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True, mig_devices={"1g.10 gb": 1})]),
        "Entry 1 of layout 'a' names the MIG profile '1g.10 gb', which is not written like one (for example 1g.10gb or 3g.40gb).",
        id="profile-malformed",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True, mig_devices={"1g.10gb": "2"})]),
        "Entry 1 of layout 'a' asks for '2' of 1g.10gb; a count must be a whole number of 0 or more.",
        id="count-string",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True, mig_devices={"1g.10gb": -1})]),
        "Entry 1 of layout 'a' asks for -1 of 1g.10gb; a count must be a whole number of 0 or more.",
        id="count-negative",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=True, mig_devices={"1g.10gb": 0})]),
        "Entry 1 of layout 'a' lists mig-devices whose counts are all 0; write 'mig-devices: {}' for MIG mode without instances.",
        id="all-counts-zero",
    ),
]


@pytest.mark.parametrize("document, message", CONFIG_ERRORS)
def test_config_errors(document, message):
    with pytest.raises(MigConfigError) as error:
        parse_configs(document)
    assert str(error.value) == message


RESOLVE_ERRORS = [
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=False)], b=[entry(devices="all", mig_enabled=False)]),
        "c",
        H100_NODE,
        "Layout 'c' is not defined; the configuration defines a, b.",
        id="unknown-selected",
    ),
    pytest.param(
        layouts(a=[entry(devices=[0, 8], mig_enabled=False)]),
        "a",
        H100_NODE,
        "Entry 1 of layout 'a' names GPU 8, but this node has GPUs 0 to 7.",
        id="index-out-of-range",
    ),
    pytest.param(
        layouts(a=[entry(devices=[1], device_filter="0x233010DE", mig_enabled=False)]),
        "a",
        H100_NODE[:1],
        "Entry 1 of layout 'a' names GPU 1, but this node has only GPU 0.",
        id="index-out-of-range-with-matching-filter",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", device_filter=["0x20B010DE", "0x20B210DE"], mig_enabled=True, mig_devices={})]),
        "a",
        H100_NODE,
        "Layout 'a' applies to no GPU on this node: its device filters 0x20B010DE, 0x20B210DE match none of its GPUs, which are 0x233010DE.",
        id="device-filter-matches-nothing",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", mig_enabled=False)]),
        "a",
        [],
        "Layout 'a' applies to no GPU on this node: the node has no GPU.",
        id="no-gpu",
    ),
    pytest.param(
        layouts(a=[entry(devices=[2], mig_enabled=True, mig_devices={})]),
        "a",
        MIXED_NODE,
        "Entry 1 of layout 'a' enables MIG on GPU 2, an NVIDIA L40S, which does not support MIG.",
        id="non-mig-gpu-named",
    ),
]


# Subsystem-qualified filters (mig-parted v0.15.0, mig.md 1.2): both ids must match where nvidia-smi prints the
# GPU's pci.sub_device_id; where it does not, the device id alone decides.
SUBSYSTEM_NODE = [
    dict(gpu(0, "NVIDIA A100-SXM4-40GB", "0x20B010DE"), pci_sub_device_id="0x134F10DE"),
    dict(gpu(1, "NVIDIA A100-SXM4-40GB", "0x20B010DE"), pci_sub_device_id="0x145F10DE"),
]
UNKNOWN_SUBSYSTEM_NODE = [dict(gpu(0, "NVIDIA A100-SXM4-40GB", "0x20B010DE"), pci_sub_device_id=None), gpu(1, "NVIDIA A100-SXM4-40GB", "0x20B010DE")]


@pytest.mark.parametrize(
    "device_filter, node, expected",
    [
        pytest.param("0x20B010DE:0x134F10DE", SUBSYSTEM_NODE, [0], id="subsystem-matches-one-board"),
        pytest.param(["0x20B010DE:0x145f10de", "0x233010DE"], SUBSYSTEM_NODE, [1], id="lower-case-in-a-list"),
        pytest.param("0x20B010DE", SUBSYSTEM_NODE, [0, 1], id="device-only-matches-every-board"),
        pytest.param("0x20B010DE:0x134F10DE", UNKNOWN_SUBSYSTEM_NODE, [0, 1], id="unknown-subsystem-matches-on-device"),
        pytest.param("0x20B210DE:0x134F10DE", SUBSYSTEM_NODE, [], id="other-device-same-subsystem"),
    ],
)
def test_subsystem_qualified_device_filters(device_filter, node, expected):
    configs = parse_configs(layouts(a=[entry(devices="all", device_filter=device_filter, mig_enabled=False)], b=[entry(devices="all", mig_enabled=False)]))
    assert names_subsystems(configs, "a") is (":" in str(device_filter))
    assert names_subsystems(configs, "b") is False
    assert sorted(resolve_layout(configs, "a", node, strict=False)) == expected


FLEET_CASES = [
    pytest.param(
        layouts(a=[entry(devices=[0, 8], mig_enabled=False)]),
        H100_NODE[:2],
        {0: WantedGpu(False, {})},
        id="index-the-node-lacks-is-skipped",
    ),
    pytest.param(
        layouts(a=[entry(devices="all", device_filter=["0x20B010DE", "0x20B210DE"], mig_enabled=True, mig_devices={})]),
        H100_NODE,
        {},
        id="filters-matching-nothing-change-nothing",
    ),
    pytest.param(
        layouts(a=[entry(devices=[1], device_filter="0x233010DE", mig_enabled=False)]),
        H100_NODE[:1],
        {},
        id="index-the-node-lacks-with-matching-filter",
    ),
]


@pytest.mark.parametrize("document, node, expected", FLEET_CASES)
def test_fleet_files_are_resolved_like_mig_parted_when_not_strict(document, node, expected):
    configs = parse_configs(document)
    assert resolve_layout(configs, "a", node, strict=False) == expected
    with pytest.raises(MigConfigError):
        resolve_layout(configs, "a", node)


def test_fleet_files_keep_the_other_refusals():
    configs = parse_configs(layouts(a=[entry(devices=[2], mig_enabled=True, mig_devices={})]))
    with pytest.raises(MigConfigError) as error:
        resolve_layout(configs, "a", MIXED_NODE, strict=False)
    assert str(error.value) == "Entry 1 of layout 'a' enables MIG on GPU 2, an NVIDIA L40S, which does not support MIG."


@pytest.mark.parametrize("document, selected, node, message", RESOLVE_ERRORS)
def test_resolve_errors(document, selected, node, message):
    with pytest.raises(MigConfigError) as error:
        resolve_layout(parse_configs(document), selected, node)
    assert str(error.value) == message


@pytest.mark.parametrize(
    "gpus, expected",
    [
        pytest.param(
            [(0, True, {"3g.40gb": 1, "1g.10gb": 2, "2g.20gb": 1}), (1, True, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})],
            "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n"
            "      1g.10gb: 2\n      2g.20gb: 1\n      3g.40gb: 1\n",
            id="one-layout-is-all",
        ),
        pytest.param(
            [(0, False, {}), (1, True, {}), (2, False, {}), (3, True, {"7g.80gb": 1})],
            "version: v1\nmig-configs:\n  current:\n  - devices: [0, 2]\n    mig-enabled: false\n  - devices: [1]\n    mig-enabled: true\n"
            "    mig-devices: {}\n  - devices: [3]\n    mig-enabled: true\n    mig-devices:\n      7g.80gb: 1\n",
            id="groups-in-first-seen-order",
        ),
    ],
)
def test_render_export(gpus, expected):
    assert render_export(gpus) == expected
    assert yaml.safe_load(expected)["version"] == "v1"
