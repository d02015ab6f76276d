"""What every layer of the double uses: where the node's files are (KUBE_DOUBLE_ROOT), the program it is called as, its
version, the errors it reports, times and durations, flags, and the facts of the machine it runs on."""

import base64
import datetime
import json
import os
import re
import socket
import sys
import tempfile


ROOT = os.environ.get("KUBE_DOUBLE_ROOT", "")


# Each package writes its own version here (kubeadm.json, kubelet.json, kubectl.json): they may differ during an upgrade.
VERSION_DIR = "/usr/share/kube-double"


PROGRAM = os.path.basename(sys.argv[0])


KUBEADM_API = "kubeadm.k8s.io/v1beta4"


KUBELET_API = "kubelet.config.k8s.io/v1beta1"


EXIT_LAB_ERROR = 255


TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")


CLUSTER_ADMINS = {"system:masters", "kubeadm:cluster-admins"}


# The alphabet of generated label values (k8s.io/apimachinery pkg/util/rand SafeEncodeString).
SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def path(name):
    return ROOT + name


class LabError(Exception):
    """The lab itself is set up wrong, or the double was asked for something it does not model."""


class Fail(Exception):
    """An error the real program reports, printed as it prints it, with its exit code."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def status_error(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return code, body


def now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def rfc3339(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def parse_duration(text):
    """'15m', '1h30m', '24h0m0s', '0' -> seconds."""
    if text in ("0", "0s"):
        return 0
    parts = re.findall(r"(\d+)(h|m|s)", text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise Fail(f'invalid duration "{text}"')
    return sum(int(number) * {"h": 3600, "m": 60, "s": 1}[unit] for number, unit in parts)


def version():
    version_path = os.environ.get("KUBE_DOUBLE_VERSION", f"{VERSION_DIR}/{PROGRAM}.json")
    try:
        with open(version_path, encoding="utf-8") as handle:
            return json.load(handle)["version"]
    except (OSError, ValueError, KeyError) as error:
        raise LabError(f"cannot read the version of the double from {version_path}: {error}") from None


def write_file(name, content, mode=0o644):
    full = path(name)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(full))
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(content)
    os.chmod(temporary, mode)
    os.replace(temporary, full)


def read_file(name):
    with open(path(name), encoding="utf-8") as handle:
        return handle.read()


def b64(text):
    return base64.b64encode(text.encode()).decode()


def unb64(text):
    return base64.b64decode(text).decode()


def parse_flags(arguments, value_flags, bool_flags):
    flags, positional = {}, []
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        name, has_value, value = argument.partition("=")
        if name in value_flags:
            if not has_value:
                index += 1
                if index >= len(arguments):
                    raise Fail(f"flag needs an argument: {name}")
                value = arguments[index]
            flags[name] = value
        elif name in bool_flags:
            flags[name] = value if has_value else "true"
        elif argument.startswith("-"):
            raise Fail(f"unknown flag: {name}")
        else:
            positional.append(argument)
        index += 1
    return flags, positional


def swap_on():
    try:
        with open("/proc/swaps", encoding="utf-8") as handle:
            return len(handle.read().strip().splitlines()) > 1
    except OSError:
        return False


def node_address():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
