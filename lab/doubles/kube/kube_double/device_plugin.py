"""The NVIDIA device plugin: the GPUs or MIG devices nvidia-smi lists, counted as its MIG strategy counts them, and
kubelet's device manager showing them in the Node's status."""

import re
import subprocess
import sys
import time

from kube_double.workloads import running_pod


# The GPU Operator's device plugin DaemonSet labels its pods app=nvidia-device-plugin-daemonset.
DEVICE_PLUGIN_LABEL = ("app", "nvidia-device-plugin-daemonset")


MIG_STRATEGIES = ("none", "single", "mixed")


# internal/rm device_map.go build: how the plugin prefixes every error of building its device map.
DEVICE_MAP_ERROR = "error building device map from config.resources: "


# pkg/kubelet/cm/devicemanager endpoint.go endpointStopGracePeriod: how long a stopped plugin's resources keep their capacity.
ENDPOINT_STOP_GRACE_SECONDS = 300


class PluginError(Exception):
    """The device plugin could not start: it exits (and restarts), and registers nothing with kubelet."""


def mig_strategy(pod):
    """The plugin's MIG strategy (cmd/nvidia-device-plugin main.go, api/config/v1 flags.go): the --mig-strategy flag, else the
    MIG_STRATEGY environment variable of its container (a literal value), else none."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        words = [str(word) for word in (container.get("command") or []) + (container.get("args") or [])]
        for index, word in enumerate(words):
            if word.startswith("--mig-strategy="):
                return word.split("=", 1)[1]
            if word == "--mig-strategy" and index + 1 < len(words):
                return words[index + 1]
        for variable in container.get("env") or []:
            if variable.get("name") == "MIG_STRATEGY" and "value" in variable:
                return variable["value"]
    return "none"


def nvidia_smi(*arguments):
    """Run the nvidia-smi on PATH (on a lab GPU node, the nvidia-smi double); its stdout, or PluginError."""
    try:
        result = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PluginError(f"failed to initialize NVML: nvidia-smi {' '.join(arguments)}: {error}") from None
    if result.returncode != 0:
        message = (result.stdout.strip() or result.stderr.strip()).splitlines()
        raise PluginError(f"failed to initialize NVML: nvidia-smi {' '.join(arguments)} exited {result.returncode}"
                          + (f": {message[0]}" if message else ""))
    return result.stdout


def parse_gpus(listing, modes):
    """The GPUs NVML shows the plugin, from `nvidia-smi -L` (a `GPU <i>: <name> (UUID: GPU-…)` line per GPU, then for a GPU in MIG
    mode one `  MIG <profile>  Device <n>: (UUID: …)` line per MIG device; the pre-R470 form too) and `--query-gpu=index,
    mig.mode.current --format=csv,noheader`, which tells a GPU in MIG mode without instances from one without MIG mode:
    [{"index", "name", "mig": bool, "devices": [profile, …]}]."""
    enabled = {}
    for line in modes.splitlines():
        match = re.fullmatch(r"\s*(\d+),\s*(\S+)\s*", line)
        if match:
            enabled[int(match.group(1))] = match.group(2) == "Enabled"
    gpus = []
    for line in listing.splitlines():
        match = re.match(r"GPU (\d+): (.*?) \(UUID: ", line)
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2), "mig": enabled.get(int(match.group(1)), False), "devices": []})
            continue
        match = re.match(r"\s+MIG\s+(\S+)\s+Device\s+\d+:", line)
        if match and gpus:
            gpus[-1]["devices"].append(match.group(1))
            gpus[-1]["mig"] = True
    return gpus


def mixed_resource_name(profile):
    """The resource a MIG device counts under with mig-strategy=mixed, or PluginError. The plugin registers nvidia.com/mig-<profile>
    for each GPU instance profile whose compute slices are the whole instance, '+' written '.' (rm.go AddDefaultResourcesToConfig),
    and files a device under the pattern its profile matches whole (device_map.go buildMigDeviceMap; resources.go anchors the
    patterns since v0.20.0): 1g.10gb+me counts under nvidia.com/mig-1g.10gb.me, and a compute-instance profile (1c.2g.10gb),
    which no pattern matches, stops the plugin."""
    if re.match(r"\d+c\.", profile):
        raise PluginError(f"{DEVICE_MAP_ERROR}error building MIG device map: MIG profile '{profile}' does not match any resource patterns")
    return "nvidia.com/mig-" + profile.replace("+", ".")


def plugin_resources(gpus, strategy):
    """The resources and device counts the plugin registers with kubelet (internal/rm device_map.go buildDeviceMapFromConfigResources):
    none: every GPU as nvidia.com/gpu, MIG or not; single: whole GPUs, or every MIG device, as nvidia.com/gpu, refusing a node with
    both or with MIG devices of more than one profile; mixed: GPUs without MIG as nvidia.com/gpu, MIG devices under their
    profile's resource (mixed_resource_name). With single and mixed, a GPU in MIG mode without MIG devices stops the plugin. A
    resource with no device is not registered. The errors are the plugin's."""
    if strategy not in MIG_STRATEGIES:
        raise PluginError(f"invalid --mig-strategy option: {strategy}")
    whole = [gpu for gpu in gpus if strategy == "none" or not gpu["mig"]]
    resources = {"nvidia.com/gpu": len(whole)} if whole else {}
    if strategy == "none":
        return resources
    devices = [profile for gpu in gpus if gpu["mig"] for profile in gpu["devices"]]
    # The plugin files the MIG devices (mixed: under their profile's resource) before it checks the GPUs in MIG mode.
    mixed = {profile: mixed_resource_name(profile) for profile in devices} if strategy == "mixed" else {}
    if any(gpu["mig"] and not gpu["devices"] for gpu in gpus):
        raise PluginError(DEVICE_MAP_ERROR + "invalid MIG configuration: at least one device with migEnabled=true was not configured "
                                             "correctly: device 0 has an invalid MIG configuration")
    if strategy == "single":
        if len(set(devices)) > 1:
            raise PluginError(DEVICE_MAP_ERROR + "invalid MIG configuration: more than one MIG device type present on node")
        if whole and devices:
            raise PluginError(DEVICE_MAP_ERROR + "all devices on the node must be configured with the same migEnabled value")
        return {"nvidia.com/gpu": len(devices)} if devices else resources
    for profile in devices:
        resources[mixed[profile]] = resources.get(mixed[profile], 0) + 1
    return resources


def device_manager_patch(status, registered, stopped, clock):
    """kubelet's device manager as the Node's status shows it (pkg/kubelet/cm/devicemanager manager.go GetCapacity, pkg/kubelet/
    nodestatus setters.go MachineInfo): a registered resource has capacity and allocatable equal to its (all healthy) devices; a
    resource whose plugin stopped or no longer registers it keeps its capacity with every device unhealthy, allocatable 0, for
    endpointStopGracePeriod (5 minutes), then capacity 0; it is never removed. Only nvidia.com/ resources are the plugin's.
    `stopped` keeps when each stopped (kubelet's memory). The merge patch of what differs, or None."""
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    want_capacity, want_allocatable = {}, {}
    for resource, count in registered.items():
        stopped.pop(resource, None)
        want_capacity[resource] = want_allocatable[resource] = str(count)
    for resource, value in capacity.items():
        if resource.startswith("nvidia.com/") and resource not in registered:
            since = stopped.setdefault(resource, clock)
            want_capacity[resource] = "0" if clock - since >= ENDPOINT_STOP_GRACE_SECONDS else value
            want_allocatable[resource] = "0"
    patch = {}
    for field, wanted, current in (("capacity", want_capacity, capacity), ("allocatable", want_allocatable, allocatable)):
        changed = {resource: value for resource, value in wanted.items() if current.get(resource) != value}
        if changed:
            patch[field] = changed
    return {"status": patch} if patch else None


def sync_device_plugin(client, node, pods, state):
    """The NVIDIA device plugin's part: while its pod runs on this node, the plugin enumerates the GPUs once when it starts (again
    at each heartbeat while it fails, as a restarting container would) and registers its resources; kubelet's device manager
    shows them in the Node's status (device_manager_patch). nvidia-smi is run only while a plugin pod runs here. A MIG change
    under a running plugin is seen when its pod is replaced, as with the real plugin."""
    pod = running_pod(pods, DEVICE_PLUGIN_LABEL)
    if pod is None:
        state["plugin"] = None
    elif state.get("plugin") != pod["metadata"]["uid"] or state.get("resources") is None:
        try:
            resources, error = plugin_resources(parse_gpus(nvidia_smi("-L"), nvidia_smi("--query-gpu=index,mig.mode.current", "--format=csv,noheader")),
                                                mig_strategy(pod)), None
        except PluginError as failure:
            resources, error = None, str(failure)
        where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if error and error != state.get("error"):
            print(f"kubelet: device plugin {where} (lab double): {error}", file=sys.stderr)
        elif resources is not None:
            print(f"kubelet: device plugin {where} registered {', '.join(f'{k}={v}' for k, v in sorted(resources.items())) or 'nothing'}", file=sys.stderr)
        state.update(plugin=pod["metadata"]["uid"], resources=resources, error=error)
    registered = (state.get("resources") or {}) if state.get("plugin") else {}
    patch = device_manager_patch(node.get("status") or {}, registered, state.setdefault("stopped", {}), time.monotonic())
    if patch:
        client.call("PATCH", f"/api/v1/nodes/{node['metadata']['name']}/status", patch, "application/merge-patch+json")
