"""nvidia-mig-parted as the GPU Operator's mig-manager calls it (NVIDIA/mig-parted: cmd/nvidia-mig-parted/{assert,apply},
pkg/mig/config/config.go, api/spec/v1, pkg/types): its config file, assert and apply, done with nvidia-smi."""

import collections
import re
import subprocess

import yaml

from kube_double.device_plugin import parse_gpus


MIG_PROFILE_RE = re.compile(r"(?:(\d+)c\.)?(\d+)g\.(\d+)gb((?:[+-][a-z]+(?:\.[a-z]+)*)*)")


class MigPartedError(Exception):
    """nvidia-mig-parted failed (its error, as the tool prints it); the reconfiguration goes on or fails as reconfigure.go decides."""


def parse_mig_parted_config(text):
    """api/spec/v1 spec.go Spec/MigConfigSpec UnmarshalJSON: {name: [entry]} with entry {"device-filter": [ids] | None,
    "devices": "all" | [int], "mig-enabled": bool, "mig-devices": {profile: count}}; MigPartedError with mig-parted's words."""
    def fail(message):
        raise MigPartedError(f"error parsing config file: unmarshal error: {message}")

    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as error:
        fail(str(error).replace("\n", " "))
    spec = {} if spec is None else spec
    if not isinstance(spec, dict):
        fail("the config file is not a mapping")
    if spec and "version" not in spec:
        fail("unable to parse with missing 'version' field")
    if spec.get("version") != "v1":
        fail(f"unknown version: {spec.get('version') or ''}")
    configs = {}
    for key, value in spec.items():
        if key == "version":
            continue
        if key != "mig-configs":
            fail(f"unexpected field: {key}")
        if not isinstance(value, dict) or not value:
            fail("at least one entry in 'mig-configs' is required")
        for name, entries in value.items():
            if not isinstance(entries, list) or not entries:
                fail(f"at least one entry in '{name}' is required")
            configs[str(name)] = [mig_config_entry(entry, fail) for entry in entries]
    return configs


def mig_config_entry(entry, fail):
    if not isinstance(entry, dict):
        fail("a mig-config entry is not a mapping")
    for required in ("devices", "mig-enabled"):
        if required not in entry:
            fail(f"missing required field: {required}")
    result = {"device-filter": None, "devices": None, "mig-enabled": False, "mig-devices": None}
    for key, value in entry.items():
        if key == "device-filter":
            if isinstance(value, str):
                value = [value] if value else []
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                fail(f"invalid device-filter: {value!r}")
            result[key] = value
        elif key == "devices":
            if isinstance(value, str) and value != "all":
                fail(f"invalid string input for 'devices': {value}")
            if not (value == "all" or isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value)):
                fail(f"invalid devices: {value!r}")
            result[key] = value
        elif key == "mig-enabled":
            if not isinstance(value, bool):
                fail(f"invalid mig-enabled: {value!r}")
            result[key] = value
        elif key == "mig-devices":
            value = {} if value is None else value
            if not isinstance(value, dict) or not all(isinstance(count, int) and not isinstance(count, bool) for count in value.values()):
                fail(f"invalid mig-devices: {value!r}")
            for profile, count in value.items():  # pkg/types mig_config.go AssertValidFormat
                if not MIG_PROFILE_RE.fullmatch(str(profile)):
                    fail(f"error validating values in 'mig-devices' field: invalid format for '{profile}'")
                if count < 0:
                    fail(f"error validating values in 'mig-devices' field: invalid count for '{profile}': {count}")
            if value and not any(value.values()):
                fail("error validating values in 'mig-devices' field: all counts for all MigProfiles are 0")
            result[key] = {str(profile): count for profile, count in value.items()}
        else:
            fail(f"unexpected field: {key}")
    if result["mig-enabled"] and result["mig-devices"] is None:
        fail("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not result["mig-enabled"] and result["mig-devices"]:
        fail("MIG devices included when 'mig-enabled' is false")
    return result


def select_mig_config(configs, name):
    """cmd/nvidia-mig-parted/assert GetSelectedMigConfig."""
    if name not in configs:
        raise MigPartedError(f"error selecting MIG config: selected mig-config not present: {name}")
    return configs[name]


def device_id(text):
    """pkg/types device.go NewDeviceIDFromString: 0xDDDDVVVV[:0xSSSSVVVV] -> ((device, vendor), (subdevice, subvendor) or None);
    mig-parted ignores the parse error of a filter, which then matches nothing."""
    try:
        parts = [int(part, 0) for part in str(text).split(":")]
    except ValueError:
        return (0, 0), None
    if len(parts) > 2:
        return (0, 0), None
    primary = (parts[0] >> 16 & 0xFFFF, parts[0] & 0xFFFF)
    return primary, ((parts[1] >> 16 & 0xFFFF, parts[1] & 0xFFFF) if len(parts) == 2 else None)


def entry_matches(entry, gpu):
    """api/spec/v1 helpers.go MatchesDeviceFilter (the primary id, and the subsystem id when the filter has one) and MatchesDevices."""
    filters = entry["device-filter"] or []
    if filters and not any(device_id(text)[0] == gpu["device"] and (device_id(text)[1] is None or device_id(text)[1] == gpu["subsystem"])
                           for text in filters):
        return False
    return entry["devices"] == "all" or gpu["index"] in (entry["devices"] or [])


def walk_mig_config(entries, gpus):
    """cmd/nvidia-mig-parted/assert WalkSelectedMigConfigForEachGPU: (entry, gpu) for each entry, each GPU it selects."""
    return [(entry, gpu) for entry in entries for gpu in gpus if entry_matches(entry, gpu)]


def mig_config_equals(current, wanted):
    """pkg/types mig_config.go MigConfig.Equals, current.Equals(wanted)."""
    wanted = wanted or {}
    return len(current) == len(wanted) and all(wanted.get(profile, 0) > 0 and count == wanted[profile] for profile, count in current.items())


def assert_mig_mode(entries, gpus):
    """cmd/nvidia-mig-parted/assert/mode.go AssertMigMode: None when every selected GPU has the entry's MIG mode (current), else why."""
    for entry, gpu in walk_mig_config(entries, gpus):
        if not gpu["capable"]:
            if entry["mig-enabled"]:
                return "unable to assert MIG mode enabled on non MIG-capable GPU"
            continue
        if entry["mig-enabled"] != (gpu["current"] == "Enabled"):
            return "current mode different than mode being asserted"
    return None


def assert_mig_config(entries, gpus):
    """cmd/nvidia-mig-parted/assert/config.go AssertMigConfig: None when every GPU of the node is matched by an entry whose MIG
    devices it has (or whose disabled MIG mode it has), else why. A GPU no entry selects makes the assertion fail."""
    matched = {gpu["index"]: False for gpu in gpus}
    for entry, gpu in walk_mig_config(entries, gpus):
        if not gpu["capable"] and not entry["mig-enabled"]:
            matched[gpu["index"]] = True
            continue
        if not gpu["capable"]:
            return "error getting MIG mode: Not Supported"
        if not entry["mig-enabled"] and gpu["current"] == "Disabled":
            matched[gpu["index"]] = True
            continue
        if gpu["current"] != "Enabled":
            return "error getting MIGConfig: error asserting MIG enabled: MIG mode is disabled"
        matched[gpu["index"]] = mig_config_equals(gpu["devices"], entry["mig-devices"])
    return None if all(matched.values()) else "not all GPUs match the specified config"


def mig_profile(profile):
    """(C, G, the GPU instance profile's name, the compute instance profile's name or None for the full one) of '1g.10gb',
    '1c.2g.20gb', '1g.10gb+me' (go-nvlib MigProfileInfo)."""
    match = MIG_PROFILE_RE.fullmatch(profile)
    compute, slices, memory, attributes = match.group(1), int(match.group(2)), match.group(3), match.group(4) or ""
    compute = int(compute) if compute else slices
    return compute, slices, f"{slices}g.{memory}gb{attributes}", (f"{compute}c.{slices}g.{memory}gb" if compute < slices else None)


def flatten_mig_config(devices):
    """pkg/types mig_config.go Flatten: one item per device, larger GPU instances first, then larger compute instances, then
    attributes (descending). Go's map order leaves ties between profiles of the same size open; the double orders them by name."""
    items = [profile for profile, count in sorted((devices or {}).items()) for dummy in range(count)]
    items.sort(key=lambda profile: MIG_PROFILE_RE.fullmatch(profile).group(4) or "", reverse=True)
    return sorted(items, key=lambda profile: (-mig_profile(profile)[1], -mig_profile(profile)[0]))


def mig_orderings(items):
    """pkg/mig/config/config.go iteratePermutationsUntilSuccess: the orderings it tries, in its order (swaps, skipping a swap with an
    equal item)."""
    items = list(items)

    def iterate(i):
        if i >= len(items):
            yield list(items)
            return
        for j in range(i, len(items)):
            if all(items[k] != items[j] for k in range(i, j)):
                items[i], items[j] = items[j], items[i]
                yield from iterate(i + 1)
                items[i], items[j] = items[j], items[i]

    return iterate(0)


class MigParted:
    """nvidia-mig-parted assert and apply for one selected config, done with the nvidia-smi on PATH (on a lab GPU node the
    nvidia-smi double) where mig-parted calls NVML: the GPUs are read with --query-gpu and -L, modes set with -i N -mig 1|0,
    a reset with -r -i <bus ids> (as util.nvmlResetAllGPUs shells out), instances cleared with mig -dci/-dgi and created with
    mig -cgi … -C (a run of whole-GPU-instance profiles in one call: created one after the other, stopping at the first
    failure, as mig-parted's loop does) or mig -cgi then -cci for compute-instance profiles (1c.2g.20gb)."""

    def __init__(self, entries):
        self.entries, self._gpus = entries, None

    def smi(self, *arguments, ok=(0,)):
        try:
            result = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise MigPartedError(f"error initializing NVML: nvidia-smi {' '.join(arguments)}: {error}") from None
        if arguments and arguments[0] not in ("-L",) and not arguments[0].startswith("--query-gpu"):
            self._gpus = None  # something may have changed
        output = (result.stdout + result.stderr).strip()
        if result.returncode not in ok:
            lines = [line for line in output.splitlines() if line.strip()]
            first = next((index for index, line in enumerate(lines)
                          if line.startswith(("Unable", "Failed", "No ", "NVIDIA-SMI has failed", "The following"))), 0)
            reason = " ".join(line.strip() for line in lines[first:first + 2]) if lines and lines[first].endswith(":") else (lines[first] if lines else "")
            raise MigPartedError(f"nvidia-smi {' '.join(arguments)} exited {result.returncode}" + (f": {reason.strip()}" if reason else ""))
        return result.returncode, output

    def gpus(self):
        """[{"index", "bus_id", "device": (device, vendor), "subsystem", "capable", "current", "pending", "devices": {profile: count}}]."""
        if self._gpus is None:
            rc, rows = self.smi("--query-gpu=index,pci.bus_id,pci.device_id,pci.sub_device_id,mig.mode.current,mig.mode.pending",
                                "--format=csv,noheader", ok=(0, 6))
            gpus = {}
            for row in rows.splitlines() if rc == 0 else []:
                fields = [field.strip() for field in row.split(",")]
                if len(fields) != 6 or not fields[0].isdigit():
                    continue
                index, bus_id, device, subsystem, current, pending = fields
                gpus[int(index)] = {"index": int(index), "bus_id": bus_id, "device": device_id(device)[0],
                                    "subsystem": device_id(subsystem)[0] if subsystem.startswith("0x") else None,
                                    "capable": current in ("Enabled", "Disabled"), "current": current, "pending": pending, "devices": {}}
            if gpus:
                dummy, listing = self.smi("-L")
                for listed in parse_gpus(listing, ""):  # the MIG devices of each GPU, as the device plugin reads them
                    if listed["index"] in gpus:
                        gpus[listed["index"]]["devices"] = dict(collections.Counter(listed["devices"]))
            self._gpus = [gpus[index] for index in sorted(gpus)]
        return self._gpus

    def assert_mode(self):
        return assert_mig_mode(self.entries, self.gpus())

    def assert_config(self):
        return self.assert_mode() or assert_mig_config(self.entries, self.gpus())

    def apply(self, mode_only=False):
        """cmd/nvidia-mig-parted/apply ApplyMigConfigWithHooks (no hooks file): the MIG mode where AssertMigMode fails, then (not
        with --mode-only) the MIG devices where AssertMigConfig fails."""
        if self.assert_mode():
            self.apply_mode()
        if not mode_only and assert_mig_config(self.entries, self.gpus()):
            self.apply_config()

    def clear(self, gpu):
        """pkg/mig/config/config.go ClearMigConfig: every compute instance, then every GPU instance (nothing there is no error)."""
        self.smi("mig", "-dci", "-i", str(gpu["index"]), ok=(0, 6))
        self.smi("mig", "-dgi", "-i", str(gpu["index"]), ok=(0, 6))

    def apply_mode(self):
        """cmd/nvidia-mig-parted/apply/mode.go ApplyMigMode: for each selected MIG-capable GPU, clear its MIG devices if MIG is on
        and set the entry's mode; then, if a change is pending on any GPU (an Ampere GPU the driver could not reset), reset all
        GPUs (nvidia-smi -r), which fails while a client holds one."""
        walked = []
        for entry, gpu in walk_mig_config(self.entries, self.gpus()):
            if not gpu["capable"]:
                if entry["mig-enabled"] and entry["devices"] != "all":
                    raise MigPartedError("cannot set MIG mode on non MIG-capable GPU")
                continue
            if gpu["current"] != "Disabled":
                try:
                    self.clear(gpu)
                except MigPartedError as error:
                    raise MigPartedError(f"error clearing existing MIG configurations: {error}") from None
            try:
                self.smi("-i", str(gpu["index"]), "-mig", "1" if entry["mig-enabled"] else "0")
            except MigPartedError as error:
                raise MigPartedError(f"error setting MIG mode: {error}") from None
            walked.append(gpu["index"])
        gpus = self.gpus()
        if any(gpu["current"] != gpu["pending"] for gpu in gpus if gpu["index"] in walked):
            try:
                self.smi("-r", "-i", ",".join(gpu["bus_id"] for gpu in gpus))
            except MigPartedError as error:
                raise MigPartedError(f"error resetting all GPUs: {error}") from None

    def apply_config(self):
        """cmd/nvidia-mig-parted/apply/config.go ApplyMigConfig: for each selected GPU with MIG on whose MIG devices differ,
        SetMigConfig; a GPU whose MIG mode is not the entry's is an error."""
        for entry, gpu in walk_mig_config(self.entries, self.gpus()):
            if not gpu["capable"]:
                if entry["mig-enabled"] and entry["devices"] != "all":
                    raise MigPartedError("cannot set MIG config on non MIG-capable GPU")
                continue
            if entry["mig-enabled"] and gpu["current"] == "Disabled":
                raise MigPartedError("unable to apply MIG config with MIG mode disabled")
            if not entry["mig-enabled"] and gpu["current"] == "Enabled":
                raise MigPartedError("MIG mode is currently enabled, but the configuration specifies it should be disabled")
            if not entry["mig-enabled"] or mig_config_equals(gpu["devices"], entry["mig-devices"]):
                continue
            try:
                self.set_config(gpu, entry["mig-devices"])
            except MigPartedError as error:
                raise MigPartedError(f"error setting MIGConfig: {error}") from None

    def set_config(self, gpu, devices):
        """pkg/mig/config/config.go SetMigConfig: each ordering of the devices in turn (iteratePermutationsUntilSuccess) on a cleared
        GPU, until one can be created; when none can, the GPU is cleared and the error returned."""
        existing, last = dict(gpu["devices"]), None
        for ordering in mig_orderings(flatten_mig_config(devices)):
            try:
                if existing:
                    try:
                        self.clear(gpu)
                    except MigPartedError as error:
                        raise MigPartedError(f"error clearing MigConfig: {error}") from None
                self.create(gpu["index"], ordering)
                return
            except MigPartedError as error:
                last = error
                existing = next((g["devices"] for g in self.gpus() if g["index"] == gpu["index"]), {})
        try:
            self.clear(gpu)
        except MigPartedError:
            pass  # mig-parted logs "erroneous devices may persist"
        raise MigPartedError(f"error attempting multiple config orderings: all orderings failed (the last: {last})")

    def create(self, index, ordering):
        """One ordering: a GPU instance with its compute instance per device; a compute-instance profile goes into the previous
        device's GPU instance when that has the same profile and room (reuseGI), else into a new one."""
        batch, last_gi, gi_id = [], None, None

        def flush():
            if batch:
                try:
                    self.smi("mig", "-cgi", ",".join(batch), "-C", "-i", str(index))
                except MigPartedError as error:
                    raise MigPartedError(f"error creating GPU instance: {error}") from None
                batch.clear()

        for profile in ordering:
            dummy, dummy, gi_profile, ci_profile = mig_profile(profile)
            if ci_profile is None:
                # A whole-instance compute instance never fits in the previous GPU instance (mig-parted's CreateComputeInstance
                # there fails and it makes a new GPU instance): the double goes straight to the new one.
                batch.append(profile)
                last_gi, gi_id = gi_profile, None
                continue
            flush()
            if gi_id is not None and last_gi == gi_profile:
                try:
                    self.smi("mig", "-cci", ci_profile, "-gi", gi_id, "-i", str(index))
                    continue
                except MigPartedError:
                    pass  # no room left in it: a new GPU instance
            try:
                dummy, output = self.smi("mig", "-cgi", gi_profile, "-i", str(index))
                gi_id = re.search(r"Successfully created GPU instance ID\s+(\d+)", output).group(1)
                self.smi("mig", "-cci", ci_profile, "-gi", gi_id, "-i", str(index))
            except (MigPartedError, AttributeError) as error:
                raise MigPartedError(f"error creating Compute instance for '{profile}': {error}") from None
            last_gi = gi_profile
        flush()
