"""kubeadm's configuration files, read and checked as `kubeadm config validate` does."""

import re

import yaml

from kube_double.core import Fail, KUBEADM_API, KUBELET_API, read_file, version


KNOWN_FIELDS = {
    "InitConfiguration": {"apiVersion", "kind", "bootstrapTokens", "nodeRegistration", "localAPIEndpoint", "certificateKey", "skipPhases", "patches",
                          "timeouts", "dryRun"},
    "ClusterConfiguration": {"apiVersion", "kind", "etcd", "networking", "kubernetesVersion", "controlPlaneEndpoint", "apiServer", "controllerManager",
                             "scheduler", "dns", "proxy", "certificatesDir", "imageRepository", "featureGates", "clusterName", "encryptionAlgorithm",
                             "certificateValidityPeriod", "caCertificateValidityPeriod"},
    "JoinConfiguration": {"apiVersion", "kind", "dryRun", "nodeRegistration", "caCertPath", "discovery", "controlPlane", "skipPhases", "patches", "timeouts"},
    "KubeletConfiguration": None,
    "KubeProxyConfiguration": None,
}


NODE_REGISTRATION_FIELDS = {"name", "criSocket", "taints", "kubeletExtraArgs", "ignorePreflightErrors", "imagePullPolicy", "imagePullSerial"}


def load_config(name):
    """Read and check a kubeadm configuration file as `kubeadm config validate` does; returns {kind: document}."""
    try:
        documents = [document for document in yaml.safe_load_all(read_file(name)) if document]
    except FileNotFoundError:
        raise Fail(f"unable to read config from \"{name}\" : open {name}: no such file or directory") from None
    except yaml.YAMLError as error:
        raise Fail(f"error converting YAML to JSON: {error}") from None
    result = {}
    for document in documents:
        kind, api = document.get("kind"), document.get("apiVersion")
        if kind not in KNOWN_FIELDS:
            raise Fail(f'no kind "{kind}" is registered for version "{api}" in scheme')
        expected = KUBELET_API if kind == "KubeletConfiguration" else "kubeproxy.config.k8s.io/v1alpha1" if kind == "KubeProxyConfiguration" else KUBEADM_API
        if api != expected:
            raise Fail(f'no kind "{kind}" is registered for version "{api}" in scheme "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/scheme.go:31"')
        allowed = KNOWN_FIELDS[kind]
        if allowed is not None:
            for field in document:
                if field not in allowed:
                    raise Fail(f'strict decoding error: unknown field "{field}"')
            for field in document.get("nodeRegistration") or {}:
                if field not in NODE_REGISTRATION_FIELDS:
                    raise Fail(f'strict decoding error: unknown field "nodeRegistration.{field}"')
            extra = (document.get("nodeRegistration") or {}).get("kubeletExtraArgs", [])
            if not isinstance(extra, list) or any(set(item) != {"name", "value"} for item in extra):
                raise Fail("json: cannot unmarshal object into Go struct field NodeRegistrationOptions.nodeRegistration.kubeletExtraArgs of type []v1beta4.Arg")
        result[kind] = document
    check_cluster_configuration(result.get("ClusterConfiguration"))
    return result


def check_cluster_configuration(cluster):
    if not cluster:
        return
    import ipaddress  # only for validation
    networking = cluster.get("networking") or {}
    networks = {}
    for field in ("podSubnet", "serviceSubnet"):
        if field in networking:
            try:
                networks[field] = ipaddress.ip_network(networking[field])
            except ValueError:
                raise Fail(f'networking.{field}: Invalid value: "{networking[field]}": couldn\'t parse subnet') from None
    if len(networks) == 2 and networks["podSubnet"].overlaps(networks["serviceSubnet"]):
        raise Fail(f'networking.podSubnet: Invalid value: "{networking["podSubnet"]}": pod subnet overlaps with service subnet')
    wanted = str(cluster.get("kubernetesVersion", "")).lstrip("v")
    if wanted and not re.fullmatch(r"\d+\.\d+\.\d+", wanted):
        raise Fail(f'couldn\'t parse Kubernetes version "{wanted}"')
    if wanted and wanted.split(".")[:2] != version().split(".")[:2]:
        raise Fail(f"this version of kubeadm only supports deploying clusters with the control plane version >= {version().rsplit('.', 1)[0]}.0. "
                   f"Current version: v{wanted}")
