"""Versions during an upgrade (kubeadm, kubelet and kubectl each read their own package's version file, so they may differ
on a node mid-upgrade): the version kubelet runs (read once when it starts, as the running binary's), and the control
plane's (the image tags of its static pod manifests, which kubeadm upgrade apply and upgrade node rewrite; the API server
reports the tag of the manifest it was started from, and kubelet restarts it when the manifest changes)."""

import os
import re

import yaml

from kube_double.core import LabError, path, read_file, version


MANIFESTS = "/etc/kubernetes/manifests"


CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse(text):
    """'v1.36.2' or '1.36.2' -> (1, 36, 2); None for anything else."""
    match = _SEMVER.fullmatch(str(text or "").strip())
    return tuple(int(part) for part in match.groups()) if match else None


def shown(parsed):
    return "v" + ".".join(str(part) for part in parsed)


_RUNNING = {}


def running_version():
    """The version of this process's binary: read once, when the process first asks, as a running program keeps its own
    version while its package is upgraded underneath it (kubelet reports the new version only after a restart)."""
    if "version" not in _RUNNING:
        _RUNNING["version"] = version()
    return _RUNNING["version"]


def image_version(manifest):
    """The version of a static pod from its manifest's image tag (1.36.2 of registry.k8s.io/kube-apiserver:v1.36.2), None without one."""
    try:
        image = manifest["spec"]["containers"][0]["image"]
    except (KeyError, IndexError, TypeError):
        return None
    return image.rsplit(":", 1)[-1].lstrip("v") if ":" in image else None


def manifest_version(component):
    """The version of a control-plane component from its static pod manifest on this node, None without the manifest."""
    name = f"{MANIFESTS}/{component}.yaml"
    if not os.path.exists(path(name)):
        return None
    try:
        return image_version(yaml.safe_load(read_file(name)))
    except (OSError, yaml.YAMLError) as error:
        raise LabError(f"cannot read {name}: {error}") from None


def served_version(manifest):
    """What an API server started from this manifest reports at /version: its image's tag, else the kubelet package's."""
    return image_version(manifest) or version()
