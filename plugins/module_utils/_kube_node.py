# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure logic of a Kubernetes node: what the inventory asks, what the node has, what must change, what is wrong.

No Ansible import: the kube_node_facts module reads the node through the parsers here, the filters in
plugins/filter/kube.py expose the checks, and tests/unit calls them directly.
"""

from __future__ import annotations

import re

from ansible_collections.onprem.gpu.plugins.module_utils import _acceptance as acceptance
from ansible_collections.onprem.gpu.plugins.module_utils._kube_upgrade import parse_version, shown
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import is_debian_family
from ansible_collections.onprem.gpu.plugins.module_utils._package_source import desired_files
from ansible_collections.onprem.gpu.plugins.module_utils._validate import labels_problems

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# kubeadm's pinned pause image per minor release (PauseVersion in kubernetes' cmd/kubeadm/app/constants/constants.go).
PAUSE_VERSIONS = {
    (1, 31): "3.10",
    (1, 32): "3.10",
    (1, 33): "3.10",
    (1, 34): "3.10.1",
    (1, 35): "3.10.1",
}

# Labels a kubelet may set on its own Node (k8s.io/kubelet pkg/apis/well_known_labels.go, kubeletLabels), beyond the
# [*.]kubelet.kubernetes.io/* and [*.]node.kubernetes.io/* namespaces; kubelet refuses any other kubernetes.io or k8s.io
# label in --node-labels and exits (cmd/kubelet/app/options, "unknown 'kubernetes.io' or 'k8s.io' labels").
KUBELET_LABELS = frozenset((
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
))
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")

_VERSION = re.compile(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)$")
_ENDPOINT = re.compile(r"^[A-Za-z0-9.-]+:[0-9]{1,5}$")
_FSTAB_SWAP = re.compile(r"^([^#\s]+\s+\S+\s+swap\s.*)$", re.MULTILINE)
# kubeadm writes it when the node joins (or inits) its cluster, and `kubeadm reset` deletes it: the sign of a member.
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"


def _minor(version) -> tuple[int, int] | None:
    match = _VERSION.fullmatch(str(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def pause_image(version, repository: str = "registry.k8s.io") -> str:
    """The pod sandbox image kubeadm expects for a cluster at ``version`` (a full Kubernetes version)."""
    minor = _minor(version)
    if minor is None:
        raise ValueError(f"kube_version must be a full Kubernetes version such as 1.35.4, not {version!r}.")
    newest = max(PAUSE_VERSIONS)
    if minor > newest:
        # A release newer than the table keeps the newest known pause image (it changes every few releases at most):
        # `kubeadm config images list` of that release says which one it wants; set the sandbox image when they differ.
        minor = newest
    if minor not in PAUSE_VERSIONS:
        known = ", ".join(f"{major}.{number}" for major, number in sorted(PAUSE_VERSIONS))
        raise ValueError(f"the pause image of Kubernetes {minor[0]}.{minor[1]} is not known (known: {known}); "
                         "set the container runtime's sandbox image explicitly.")
    return f"{repository.rstrip('/')}/pause:{PAUSE_VERSIONS[minor]}"


def kubelet_label_refused(name: str) -> bool:
    """Whether kubelet refuses to set the label ``name`` on its own Node (--node-labels)."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    reserved = any(domain == suffix or domain.endswith("." + suffix) for suffix in RESERVED_LABEL_DOMAINS)
    if not reserved or name in KUBELET_LABELS:
        return False
    return not any(domain == namespace or domain.endswith("." + namespace) for namespace in KUBELET_LABEL_NAMESPACES)


def input_problems(host: str, settings: dict) -> list[str]:
    """Sentences saying what is wrong with a node's inventory; empty when it can be used.

    ``settings``: version, api_endpoint, pools (the pool groups the host is in), labels, taints, datacenter,
    control_plane_datacenters (the datacenters that have a control-plane host), control_plane_group.
    """
    problems = []
    version = settings.get("version")
    if version is None or _minor(version) is None:
        problems.append(f"{host}: kube_version must be a full Kubernetes version such as 1.35.4 (got {version if version is not None else 'nothing'}); "
                        "set it in the group_vars of the datacenter.")
    endpoint = settings.get("api_endpoint")
    if not isinstance(endpoint, str) or not _ENDPOINT.fullmatch(endpoint):
        problems.append(f"{host}: kube_api_endpoint must be the host:port where the cluster's API answers, for example 10.10.0.10:6443 or "
                        f"api.dc1.example.internal:6443 (got {endpoint if endpoint is not None else 'nothing'}); set it in the group_vars of the datacenter.")
    pools = settings.get("pools") or []
    if len(pools) > 1:
        problems.append(f"{host} is in the groups {' and '.join(pools)}: a node belongs to one pool, so remove it from all but one of them.")
    labels, taints = settings.get("labels"), settings.get("taints")
    taints_ok = isinstance(taints, list) and all(
        isinstance(taint, dict) and "key" in taint and taint.get("effect", "") in TAINT_EFFECTS for taint in taints)
    if not isinstance(labels, dict) or not taints_ok:
        problems.append(f"{host}: kube_node_labels must be a mapping of label names to values and kube_node_taints a list of "
                        f"{{key, value, effect}} with effect NoSchedule, PreferNoSchedule or NoExecute (got {labels} and {taints}).")
    else:
        # kubelet takes the labels as one --node-labels=key=value,... argument: a ',' or '=' in a value would add labels.
        problems += labels_problems(f"{host}: kube_node_labels", labels)
    if isinstance(labels, dict) and taints_ok and settings.get("kubelet_labels", True):
        refused = sorted(name for name in labels if kubelet_label_refused(str(name)))
        if refused:
            problems.append(f"{host}: kubelet may not set {', '.join(refused)} on its own Node (NodeRestriction allows only kubelet.kubernetes.io/*, "
                            "node.kubernetes.io/* and the well-known hostname, os, arch, instance-type, region and zone labels in the "
                            "kubernetes.io and k8s.io namespaces, and kubelet exits on any other), so drop them from kube_node_labels.")
    datacenter = settings.get("datacenter")
    if not datacenter or datacenter not in (settings.get("control_plane_datacenters") or []):
        problems.append(f"{host}: datacenter {datacenter or '(none)'} has no host in the {settings.get('control_plane_group', 'control_plane')} "
                        "group, so there is no control plane for it to join; add its control-plane host there.")
    return problems


def parse_dpkg_query(text: str) -> dict:
    """{package: {version, held}} from `dpkg-query --show --showformat '${Package}\\t${Version}\\t${db:Status-Want} ${db:Status-Status}\\n'`.

    A package that is known but not installed has no version; one that dpkg does not know is absent.
    """
    packages = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or not fields[0]:
            continue
        name, version, status = fields
        want, _space, state = status.partition(" ")
        installed = state in ("installed", "half-configured", "unpacked", "triggers-awaited", "triggers-pending")
        packages[name.split(":")[0]] = {"version": version if installed and version else None, "held": want == "hold"}
    return packages


def parse_systemctl_show(text: str) -> list[dict]:
    """The property blocks of `systemctl show UNIT... --property ...`, in the order of the units."""
    blocks = []
    for block in re.split(r"\n\s*\n", text.strip()):
        properties = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                properties[key] = value
        if properties:
            blocks.append(properties)
    return blocks


def _status(answer: dict) -> str:
    status = answer.get("status") or -1
    return f"HTTP {status}" if status > 0 else (answer.get("msg") or "no answer")


def mirror_problems(host: str, facts: dict, wanted: dict) -> list[str]:
    """Sentences saying what the mirror lacks for the cluster's version; empty when it offers everything.

    ``facts`` holds kube_node_facts' ``key`` and ``offers``, the answer of the collection's one offers check
    (module_utils/_package_probe): the repository read through a private APT configuration with its key.
    """
    offers, key = facts.get("offers") or {}, facts.get("key") or {}
    if key.get("status") != 200 or "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in (key.get("content") or ""):
        return [f"{host} gets no ASCII-armored signing key from {wanted['key_url']} ({_status(key)}); check kube_node_repo_key_url."]
    if offers.get("unreadable"):
        return [f"{host} cannot read the Kubernetes repository {wanted['repo_url']} ({offers['unreadable'].rstrip('.')}); check kube_node_repo_url, "
                "that the mirror is up, and the network path from this host to it."]
    offered = offers.get("offered") or {}
    missing = [name for name in wanted["packages"] if any(request.partition("=")[0] == name for request in offers.get("missing") or [])]
    if missing:
        kubeadm = ", ".join(offered.get("kubeadm", [])) or "in no version"
        return [f"The mirror {wanted['repo_url']} has no {', '.join(missing)} at Kubernetes {wanted['version']} (it offers kubeadm {kubeadm}); "
                "set kube_version to an offered version or publish it on the mirror."]
    return []


def platform_problems(host: str, facts: dict) -> list[str]:
    os_release = facts.get("os_release") or {}
    if is_debian_family(os_release):
        return []
    name = os_release.get("PRETTY_NAME") or os_release.get("ID") or "an unknown system"
    return [f"{host} runs {name}; the kube_node role installs kubelet, kubeadm and kubectl on Debian 12 and Ubuntu 22.04/24.04 only so far "
            "(EL 9 is not implemented yet)."]


def _sysctls_differ(facts: dict, wanted: dict) -> list[str]:
    now = facts.get("sysctls") or {}
    return [f"{name}={value}" for name, value in wanted["sysctls"].items() if now.get(name) != str(value)]


def _same_text(found, wanted) -> bool:
    # A template lookup and the template module may differ in the last newline only.
    return found is not None and found.rstrip("\n") == str(wanted).rstrip("\n")


def node_work(facts: dict, wanted: dict) -> dict:
    """What the node base lacks that the role changes, one short phrase each: {install: [...], configure: [...]}.

    ``wanted``: version, packages, install_files and configure_files ({path: content}), sysctls, kernel_modules, swap_off, and
    pin_file ({path, text}: the APT preferences file package_source writes for the packages' holds; optional).
    Both lists are empty on a node that needs nothing.
    """
    files = facts.get("files") or {}
    packages = facts.get("packages") or {}
    prefix = wanted["version"] + "-"
    install = [f"write {path}" for path, content in wanted["install_files"].items() if not _same_text(files.get(path), content)]
    to_install = [name for name in wanted["packages"] if not (packages.get(name, {}).get("version") or "").startswith(prefix)]
    install += [f"install {name}" for name in to_install]
    # Installing another version drops APT's hold, and the hold at a version is what pins it (package_source's
    # preferences file): a package installed, not held, or not pinned as wanted is held (and pinned) again.
    pin_file = wanted.get("pin_file") or {}
    pins_differ = bool(pin_file.get("text")) and not _same_text(files.get(pin_file["path"]), pin_file["text"])
    install += [f"hold {name}" for name in wanted["packages"] if name in to_install or pins_differ or not packages.get(name, {}).get("held")]
    configure = [f"write {path}" for path, content in wanted["configure_files"].items() if not _same_text(files.get(path), content)]
    present = facts.get("kernel_modules") or []
    configure += [f"load {module}" for module in wanted["kernel_modules"] if module not in present]
    configure += [f"set {item}" for item in _sysctls_differ(facts, wanted)]
    units = facts.get("units") or {}
    if wanted["swap_off"]:
        if facts.get("swap_areas"):
            configure.append("turn swap off")
        if _FSTAB_SWAP.search(files.get("/etc/fstab") or ""):
            configure.append("comment out swap in /etc/fstab")
        if units.get("swap.target", {}).get("UnitFileState") != "masked":
            configure.append("mask swap.target")
    if units.get("kubelet.service", {}).get("UnitFileState") != "enabled":
        configure.append("enable kubelet")
    return {"install": install, "configure": configure}


def node_problems(host: str, facts: dict, wanted: dict) -> list[str]:
    """Sentences saying how the node base differs from what kubelet needs; empty when it is right."""
    packages = facts.get("packages") or {}
    version = wanted["version"]
    wrong = [name for name in wanted["packages"] if not (packages.get(name, {}).get("version") or "").startswith(version + "-")]
    kubelet = facts.get("kubelet_version") or ""
    if not re.search("v" + re.escape(version) + r"(\s|$)", kubelet):
        wrong.append("kubelet (the binary)")
    problems = []
    if wrong:
        problems.append(f"not at v{version}: {', '.join(wrong)}")
    unheld = [name for name in wanted["packages"] if not packages.get(name, {}).get("held")]
    if unheld:
        problems.append(f"not held: {', '.join(unheld)}")
    if wanted["swap_off"] and facts.get("swap_areas"):
        problems.append("swap is on (/proc/swaps lists areas); run swapoff -a")
    differ = _sysctls_differ(facts, wanted)
    if differ:
        found = ", ".join(f"{name}={value}" for name, value in (facts.get("sysctls") or {}).items())
        problems.append(f"sysctls differ: wanted {', '.join(differ)}, found {found}")
    mounts = (facts.get("units") or {}).get("kubelet.service", {}).get("RequiresMountsFor", "").split()
    missing = [mount for mount in wanted["required_mounts"] if mount not in mounts]
    if missing:
        problems.append(f"kubelet does not wait for {', '.join(missing)} (RequiresMountsFor is \"{' '.join(mounts)}\"); "
                        "run the nvme_cache role, which writes the drop-in")
    return [f"{host}: {'; '.join(problems)}."] if problems else []


def version_change_problems(host: str, facts: dict, wanted: dict) -> list[str]:
    """Why site.yml must not move this node's Kubernetes packages to ``wanted['version']``: one sentence, or none.

    kubeadm never downgrades, so packages newer than the version are refused (the usual cause: the cluster was upgraded and
    the inventory still names the old version). A member of a cluster (kubeadm's kubelet configuration is there) at an older
    version moves only through kubeadm's upgrade procedure, which playbooks/upgrade_kubernetes.yml runs node by node; the
    packages alone would leave kubelet newer than the API server. A node that is not a member yet (new, or reset) is
    installed at the version, whatever it had. ``wanted['upgrade']`` true (kube_upgrade's own check) allows the move.
    """
    version = parse_version(wanted.get("version"))
    if version is None or wanted.get("upgrade"):
        return []
    packages = facts.get("packages") or {}
    installed = {name: (packages.get(name) or {}).get("version") for name in wanted.get("packages") or []}
    versions = {name: parse_version(text) for name, text in installed.items() if parse_version(text) is not None}
    newer = [name for name, found in versions.items() if found > version]
    if newer:
        packages_found = ", ".join(f"{name} {installed[name]}" for name in newer)
        return [f"{host} has {packages_found} installed, newer than kube_version {shown(version)}, and kubeadm does not downgrade a node: if "
                f"the cluster was upgraded (playbooks/upgrade_kubernetes.yml), set kube_version: \"{shown(max(versions[name] for name in newer))}\" "
                "in the datacenter's group_vars; nothing was changed."]
    older = [name for name, found in versions.items() if found < version]
    if older and (facts.get("files") or {}).get(KUBELET_CONFIG) is not None:
        return [f"{host} is a node of its cluster at Kubernetes {shown(min(versions[name] for name in older))}, older than kube_version "
                f"{shown(version)}: a cluster moves to a new version through kubeadm's upgrade procedure, node by node (ansible-playbook "
                f"playbooks/upgrade_kubernetes.yml -e kube_version={shown(version)}), which site.yml does not run; nothing was changed."]
    return []


def preflight_problems(host: str, settings: dict, facts: dict | None = None, wanted: dict | None = None) -> list[str]:
    """The inventory's problems; when it has none and the node was read, the platform's, the version change's and the
    mirror's."""
    problems = input_problems(host, settings)
    if problems or facts is None:
        return problems
    # kube_node_facts asks the mirror only on a supported platform.
    return platform_problems(host, facts) or version_change_problems(host, facts, wanted or {}) or mirror_problems(host, facts, wanted or {})


def repository_files(repository: dict, key: str) -> dict:
    """{path: content} of the Kubernetes repository's key and source file as package_source writes them (the node's
    ``install_files``), with ``key``, the signing key the mirror served (empty when none was read)."""
    return desired_files("Debian", [repository], {repository["name"]: key or ""}, "")


# What kube_node_facts judges in the task that reads (its ``check`` option): the preflight alone (the entry point
# `preflight`), or the preflight and, on a node that lacks nothing, the verification (the entry point `main`).
CHECKS = ("preflight", "preflight_and_verify")


def judgement(check: str, host: str, settings: dict, facts: dict, wanted: dict) -> tuple[list[str], dict | None]:
    """``(problems, work)`` of kube_node's ``check`` (one of CHECKS) on what kube_node_facts read.

    ``wanted`` as node_work takes it; its ``install_files`` come from the key the same reading got (repository_files), so
    the caller passes what it knows before the read. The problems are preflight_problems'; with ``preflight_and_verify``
    and nothing to change (node_work empty), node_problems' too: the node is as the role would leave it, so this reading
    is the verification (after changes, the role reads the node again and verifies that). ``work`` is node_work's, None
    when the preflight found problems. The module judges in the task that reads, so that a no-op run pays for one task
    where it paid for a read and two asserts.
    """
    problems = preflight_problems(host, settings, facts, wanted)
    if problems:
        return problems, None
    work = node_work(facts, wanted)
    if check == "preflight_and_verify" and not work["install"] + work["configure"]:
        problems = node_problems(host, facts, wanted)
    return problems, work


def acceptance_pending_patch(node: dict, patch: dict | None, required: bool) -> dict | None:
    """``patch`` (the pool patch of ``node``, or None) with the taint ``onprem.gpu/unhealthy=acceptance-pending:NoSchedule``
    (owner ``acceptance``) added when the site requires acceptance (``acceptance_required``) and the node has never passed it.

    A node labelled ``onprem.gpu/acceptance=passed`` never gets it back, and a node that already carries a taint of that
    key and effect (acceptance's for a failure, or another health gate's) keeps it as it is; playbooks/acceptance.yml
    removes the pending taint when the node passes.
    """
    if not required or ((node.get("metadata") or {}).get("labels") or {}).get(acceptance.LABEL) == "passed":
        return patch
    patch = dict(patch or {})
    spec = dict(patch.get("spec") or {})
    taints = list(spec.get("taints", (node.get("spec") or {}).get("taints") or []))
    if acceptance.unhealthy_taint(taints) is not None:
        return patch or None
    spec["taints"] = taints + [{"key": acceptance.UNHEALTHY_TAINT, "value": acceptance.PENDING, "effect": acceptance.EFFECT}]
    patch["spec"] = spec
    if ((node.get("metadata") or {}).get("annotations") or {}).get(acceptance.OWNER_ANNOTATION) != acceptance.OWNER:
        metadata = dict(patch.get("metadata") or {})
        metadata["annotations"] = dict(metadata.get("annotations") or {}, **{acceptance.OWNER_ANNOTATION: acceptance.OWNER})
        patch["metadata"] = metadata
    return patch
