"""What kubeadm writes: a control plane's certificates, kubeconfigs and static pod manifests, the kubelet's
configuration and flags, bootstrap tokens and the kubeadm-certs Secret."""

import datetime
import hashlib
import os
import re
import secrets
import subprocess
import tempfile

import yaml

from kube_double.core import Fail, KUBELET_API, TOKEN_RE, b64, now, parse_duration, read_file, rfc3339, version, write_file
from kube_double.pki import kubeconfig, new_leaf, openssl, sign
from kube_double.store import new_object


def write_node_certs(name, address, control_plane_endpoint, service_subnet, domain):
    """The certificates of one control-plane node, signed by the cluster's CAs: the API server's (with the node's name
    and address, the service IP and the control-plane endpoint), its kubelet client and the front proxy's client."""
    import ipaddress
    first_service_ip = str(next(ipaddress.ip_network(service_subnet).hosts()))
    endpoint_host = control_plane_endpoint.rsplit(":", 1)[0]
    sans = [f"DNS:{dns}" for dns in ("kubernetes", "kubernetes.default", "kubernetes.default.svc", f"kubernetes.default.svc.{domain}", name)]
    sans += [f"IP:{first_service_ip}", f"IP:{address}"]
    sans.append(("IP:" if re.fullmatch(r"[0-9.]+", endpoint_host) else "DNS:") + endpoint_host)
    new_leaf("/etc/kubernetes/pki/apiserver", "/etc/kubernetes/pki/ca", "/CN=kube-apiserver", sorted(set(sans)), client=False, server=True)
    new_leaf("/etc/kubernetes/pki/apiserver-kubelet-client", "/etc/kubernetes/pki/ca", "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client")
    new_leaf("/etc/kubernetes/pki/front-proxy-client", "/etc/kubernetes/pki/front-proxy-ca", "/CN=front-proxy-client")
    # The local etcd's certificates (kubeadm's certs phase: etcd-server, etcd-peer, etcd-healthcheck-client, apiserver-etcd-client),
    # which check-expiration lists and renew renews; the double's etcd serves no TLS itself.
    etcd_sans = sorted({f"DNS:{name}", "DNS:localhost", f"IP:{address}", "IP:127.0.0.1", "IP:0:0:0:0:0:0:0:1"})
    for leaf in ("server", "peer"):
        new_leaf(f"/etc/kubernetes/pki/etcd/{leaf}", "/etc/kubernetes/pki/etcd/ca", f"/CN={name}", etcd_sans, server=True)
    new_leaf("/etc/kubernetes/pki/etcd/healthcheck-client", "/etc/kubernetes/pki/etcd/ca", "/CN=kube-etcd-healthcheck-client")
    new_leaf("/etc/kubernetes/pki/apiserver-etcd-client", "/etc/kubernetes/pki/etcd/ca", "/CN=kube-apiserver-etcd-client")


def write_control_plane_kubeconfigs(name, cluster_name, server, address, port, ca_pem, file_names):
    """The kubeconfigs of a control-plane node: admin.conf and super-admin.conf reach the control-plane endpoint, the
    components' reach this node's API server."""
    subjects = {"admin.conf": "/O=kubeadm:cluster-admins/CN=kubernetes-admin", "super-admin.conf": "/O=system:masters/CN=kubernetes-super-admin",
                "kubelet.conf": f"/O=system:nodes/CN=system:node:{name}", "controller-manager.conf": "/CN=system:kube-controller-manager",
                "scheduler.conf": "/CN=system:kube-scheduler"}
    print("[kubeconfig] Using kubeconfig folder \"/etc/kubernetes\"")
    for file_name in file_names:
        write_client_kubeconfig(file_name, subjects[file_name], cluster_name,
                                server if file_name in ("admin.conf", "super-admin.conf") else f"https://{address}:{port}", ca_pem)
        print(f'[kubeconfig] Writing "{file_name}" kubeconfig file')


def write_client_kubeconfig(file_name, subject, cluster_name, server, ca_pem):
    with tempfile.TemporaryDirectory() as scratch:
        key = os.path.join(scratch, "key")
        subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
        csr = openssl("req", "-new", "-key", key, "-subj", subject)
        certificate = sign(csr, "/etc/kubernetes/pki/ca")
        with open(key, encoding="utf-8") as handle:
            key_pem = handle.read()
    user = re.search(r"CN=([^/]+)$", subject).group(1)
    write_file(f"/etc/kubernetes/{file_name}", kubeconfig(cluster_name, server, ca_pem, user, certificate, key_pem), 0o600)


def write_manifests(cluster, address, port, service_subnet, pod_subnet):
    image = cluster.get("imageRepository", "registry.k8s.io")
    wanted_version = "v" + str(cluster.get("kubernetesVersion", version())).lstrip("v")
    extra = {item["name"]: item["value"] for item in (cluster.get("apiServer") or {}).get("extraArgs", [])}
    apiserver_flags = {"advertise-address": address, "allow-privileged": "true", "authorization-mode": "Node,RBAC",
                       "client-ca-file": "/etc/kubernetes/pki/ca.crt", "enable-admission-plugins": "NodeRestriction",
                       "enable-bootstrap-token-auth": "true", "secure-port": str(port), "service-cluster-ip-range": service_subnet,
                       "tls-cert-file": "/etc/kubernetes/pki/apiserver.crt", "tls-private-key-file": "/etc/kubernetes/pki/apiserver.key",
                       "etcd-servers": "https://127.0.0.1:2379", **extra}
    components = {
        "kube-apiserver": apiserver_flags,
        "kube-controller-manager": {"allocate-node-cidrs": "true" if pod_subnet else "false", "cluster-cidr": pod_subnet,
                                    "cluster-name": cluster.get("clusterName", "kubernetes"), "kubeconfig": "/etc/kubernetes/controller-manager.conf",
                                    "service-cluster-ip-range": service_subnet, "use-service-account-credentials": "true"},
        "kube-scheduler": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "leader-elect": "true"},
        "etcd": {"advertise-client-urls": f"https://{address}:2379", "data-dir": "/var/lib/etcd",
                 "listen-client-urls": f"https://127.0.0.1:2379,https://{address}:2379"},
    }
    for component, component_flags in components.items():
        tag = "3.6.4-0" if component == "etcd" else wanted_version
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"labels": {"component": component, "tier": "control-plane"}, "name": component, "namespace": "kube-system"},
               "spec": {"containers": [{"command": [component] + [f"--{key}={value}" for key, value in sorted(component_flags.items()) if value != ""],
                                        "image": f"{image}/{component}:{tag}", "name": component}],
                        "hostNetwork": True, "priorityClassName": "system-node-critical"}}
        write_file(f"/etc/kubernetes/manifests/{component}.yaml", yaml.safe_dump(pod, sort_keys=False), 0o600)


def write_kubelet_config(cluster, registration, service_subnet, domain):
    import ipaddress
    network = ipaddress.ip_network(service_subnet)
    dns = str(network.network_address + 10)
    config = {"apiVersion": KUBELET_API, "kind": "KubeletConfiguration", "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
              "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}}, "authorization": {"mode": "Webhook"}, "cgroupDriver": "systemd",
              "clusterDNS": [dns], "clusterDomain": domain, "containerRuntimeEndpoint": "", "failSwapOn": True, "rotateCertificates": True,
              "staticPodPath": "/etc/kubernetes/manifests"}
    write_file("/var/lib/kubelet/config.yaml", yaml.safe_dump(config, sort_keys=False))
    write_kubeadm_flags(registration)


def registration_taints(registration, control_plane):
    """nodeRegistration.taints as kubeadm v1beta4 defaults it: absent (nil) is the control-plane taint on a control-plane node
    and none on a worker; a list, even an empty one, is taken as it is (kubeadm's SetNodeRegistrationDynamicDefaults)."""
    taints = registration.get("taints")
    if taints is None:
        return [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}] if control_plane else []
    return taints


def write_kubeadm_flags(registration):
    arguments = {"container-runtime-endpoint": registration.get("criSocket", "unix:///var/run/containerd/containerd.sock"),
                 "pod-infra-container-image": "registry.k8s.io/pause:3.10"}
    for item in registration.get("kubeletExtraArgs") or []:
        arguments[item["name"]] = item["value"]
    taints = registration.get("taints") or []
    if taints:
        arguments["register-with-taints"] = ",".join(f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}" for t in taints)
    if registration.get("name"):
        arguments["hostname-override"] = registration["name"]
    write_file("/var/lib/kubelet/kubeadm-flags.env",
               'KUBELET_KUBEADM_ARGS="' + " ".join(f"--{key}={value}" for key, value in arguments.items()) + '"\n')


def token_secret(token_string=None, ttl="24h0m0s", usages=None, groups=None, description=None):
    if token_string:
        match = TOKEN_RE.match(token_string)
        if not match:
            raise Fail(f'the bootstrap token "{token_string}" was not of the form "\\A([a-z0-9]{{6}})\\.([a-z0-9]{{16}})\\z"')
        token_id, token_value = match.groups()
    else:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        token_id = "".join(secrets.choice(alphabet) for _position in range(6))
        token_value = "".join(secrets.choice(alphabet) for _position in range(16))
    data = {"token-id": token_id, "token-secret": token_value, "auth-extra-groups": ",".join(groups or ["system:bootstrappers:kubeadm:default-node-token"])}
    seconds = parse_duration(ttl)
    if seconds:
        data["expiration"] = rfc3339(now() + datetime.timedelta(seconds=seconds))
    for usage in usages or ["signing", "authentication"]:
        data[f"usage-bootstrap-{usage}"] = "true"
    if description:
        data["description"] = description
    secret = new_object("Secret", f"bootstrap-token-{token_id}", "kube-system", type="bootstrap.kubernetes.io/token",
                        data={key: b64(value) for key, value in data.items()})
    return secret


# The certificates every control plane shares, which kubeadm-certs carries (kubeadm's copycerts).
SHARED_CERTIFICATES = ["ca.crt", "ca.key", "sa.key", "sa.pub", "front-proxy-ca.crt", "front-proxy-ca.key", "etcd/ca.crt", "etcd/ca.key"]


def upload_certs(admin, certificate_key=None):
    """The kubeadm-certs Secret: the shared control-plane certificates, for `join --control-plane`. The real one
    encrypts them with AES-GCM under the certificate key; the double keeps them in the clear and checks the key."""
    certificate_key = certificate_key or secrets.token_hex(32)
    data = {name.replace("/", "-"): b64(read_file(f"/etc/kubernetes/pki/{name}")) for name in SHARED_CERTIFICATES}
    data["certificate-key-sha256"] = b64(hashlib.sha256(certificate_key.encode()).hexdigest())
    admin.request("DELETE", "/api/v1/namespaces/kube-system/secrets/kubeadm-certs")
    admin.call("POST", "/api/v1/namespaces/kube-system/secrets", {"metadata": {"name": "kubeadm-certs"}, "type": "Opaque", "data": data})
    return certificate_key
