"""kubeadm: version, config validate, init (and init phase upload-certs), join (worker and control plane), token."""

import hashlib
import hmac
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time

import yaml

from kube_double.client import Client
from kube_double.core import (
    EXIT_LAB_ERROR, Fail, KUBEADM_API, TOKEN_RE, b64, node_address, now, parse_flags, parse_rfc3339, path, read_file, swap_on, unb64, version, write_file)
from kube_double.etcd_member import new_membership, write_membership
from kube_double.kubeadm_config import load_config
from kube_double.kubeadm_etcd import client_url, join_member, peer_url
from kube_double.kubeadm_upgrade import upgrade
from kube_double.kubeadm_certs import certs
from kube_double.kubeadm_reset import reset
from kube_double.kubeadm_files import (
    SHARED_CERTIFICATES, registration_taints, token_secret, upload_certs, write_control_plane_kubeconfigs, write_kubeadm_flags, write_kubelet_config,
    write_manifests, write_node_certs)
from kube_double.pki import ca_hash, jws, kubeconfig, new_ca, new_key, openssl
from kube_double.store import new_object, write_store


def kubeadm(arguments):
    if not arguments:
        raise Fail("kubeadm (lab double): a command is needed: version, config validate, init, join, token, upgrade, certs, reset", EXIT_LAB_ERROR)
    command, rest = arguments[0], arguments[1:]
    if command == "version":
        flags, _arguments = parse_flags(rest, {"-o", "--output"}, set())
        output = flags.get("-o", flags.get("--output", ""))
        if output == "short":
            print("v" + version())
        else:
            print(f'kubeadm version: &version.Info{{Major:"{version().split(".")[0]}", Minor:"{version().split(".")[1]}", GitVersion:"v{version()}"}}')
        return 0
    if command == "config" and rest[:1] == ["validate"]:
        flags, _arguments = parse_flags(rest[1:], {"--config"}, set())
        if "--config" not in flags:
            raise Fail("the --config flag is mandatory")
        load_config(flags["--config"])
        print("ok")
        return 0
    if command == "init" and rest[:1] == ["phase"]:
        return init_phase(rest[1:])
    if command == "init":
        return init(rest)
    if command == "join":
        return join(rest)
    if command == "token":
        return token(rest)
    if command == "upgrade":
        return upgrade(rest)
    if command == "certs":
        return certs(rest)
    if command == "reset":
        return reset(rest)
    raise Fail(f"kubeadm (lab double): `kubeadm {' '.join(arguments[:2])}` is not modelled (lab/doubles/kube/README.md)", EXIT_LAB_ERROR)


COMMON_FLAGS = {"--config", "--ignore-preflight-errors", "--skip-phases", "-v", "--v", "--kubeconfig", "--certificate-key"}


def init(arguments):
    flags, _arguments = parse_flags(arguments, COMMON_FLAGS, {"--upload-certs", "--skip-token-print", "--dry-run"})
    if "--config" not in flags:
        raise Fail("kubeadm (lab double): only `kubeadm init --config` is modelled", EXIT_LAB_ERROR)
    config = load_config(flags["--config"])
    init_config = config.get("InitConfiguration", {})
    cluster = config.get("ClusterConfiguration", {})
    registration = init_config.get("nodeRegistration") or {}
    name = registration.get("name") or socket.gethostname()
    endpoint = init_config.get("localAPIEndpoint") or {}
    address = endpoint.get("advertiseAddress") or node_address()
    port = int(endpoint.get("bindPort", 6443))
    print("[init] Using Kubernetes version: v" + str(cluster.get("kubernetesVersion", version())).lstrip("v"))
    print("[preflight] Running pre-flight checks")
    preflight(flags, port=port, control_plane=True)
    networking = cluster.get("networking") or {}
    service_subnet = networking.get("serviceSubnet", "10.96.0.0/12")
    domain = networking.get("dnsDomain", "cluster.local")
    control_plane_endpoint = cluster.get("controlPlaneEndpoint") or f"{address}:{port}"
    server = f"https://{control_plane_endpoint}"
    cluster_name = cluster.get("clusterName", "kubernetes")

    print("[certs] Using certificateDir folder \"/etc/kubernetes/pki\"")
    os.makedirs(path("/etc/kubernetes/pki/etcd"), exist_ok=True)
    new_ca("/etc/kubernetes/pki/ca", "kubernetes")
    new_ca("/etc/kubernetes/pki/front-proxy-ca", "front-proxy-ca")
    new_ca("/etc/kubernetes/pki/etcd/ca", "etcd-ca")
    new_key("/etc/kubernetes/pki/sa.key")
    write_file("/etc/kubernetes/pki/sa.pub", openssl("rsa", "-in", path("/etc/kubernetes/pki/sa.key"), "-pubout"))
    write_node_certs(name, address, control_plane_endpoint, service_subnet, domain)
    ca_pem = read_file("/etc/kubernetes/pki/ca.crt")
    write_control_plane_kubeconfigs(name, cluster_name, server, address, port, ca_pem,
                                    ("admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf", "scheduler.conf"))

    write_manifests(cluster, address, port, service_subnet, networking.get("podSubnet", ""))
    write_kubelet_config(cluster, registration, service_subnet, domain)

    tokens = init_config.get("bootstrapTokens") or [{}]
    store = {"resourceVersion": 1, "objects": {"configmaps": {}, "secrets": {}, "nodes": {}}}
    cluster_info = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "preferences": {},
                                   "clusters": [{"name": "", "cluster": {"certificate-authority-data": b64(ca_pem), "server": server}}],
                                   "contexts": None, "current-context": "", "users": None}, sort_keys=False)
    store["objects"]["configmaps"]["kube-public/cluster-info"] = new_object("ConfigMap", "cluster-info", "kube-public", data={"kubeconfig": cluster_info})
    store["objects"]["configmaps"]["kube-system/kubeadm-config"] = new_object(
        "ConfigMap", "kubeadm-config", "kube-system",
        data={"ClusterConfiguration": yaml.safe_dump(dict(cluster, kind="ClusterConfiguration", apiVersion=KUBEADM_API))})
    store["objects"]["configmaps"]["kube-system/kubelet-config"] = new_object(
        "ConfigMap", "kubelet-config", "kube-system", data={"kubelet": read_file("/var/lib/kubelet/config.yaml")})
    printed_tokens = []
    for wanted in tokens:
        secret = token_secret(wanted.get("token"), wanted.get("ttl", "24h0m0s"), wanted.get("usages"), wanted.get("groups"), wanted.get("description"))
        store["objects"]["secrets"][f"kube-system/{secret['metadata']['name']}"] = secret
        printed_tokens.append(unb64(secret["data"]["token-id"]) + "." + unb64(secret["data"]["token-secret"]))
    write_store(store)
    # The local etcd's one member, as kubeadm starts it: --name=<node name>, --initial-advertise-peer-urls=https://<address>:2380.
    write_membership(new_membership([{"name": name, "peerURLs": [peer_url(address)], "clientURLs": [client_url(address)]}], name))

    print("[kubelet-start] Starting the kubelet")
    restart_kubelet()
    print("[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods from directory \"/etc/kubernetes/manifests\"")
    admin = Client.from_kubeconfig("/etc/kubernetes/admin.conf", timeout=5)
    wait_for(lambda: admin.request("GET", "/readyz")[0] == 200, 240, "the control plane did not come up: kube-apiserver is not healthy")
    print("[api-check] The API server is healthy")
    wait_for(lambda: admin.request("GET", f"/api/v1/nodes/{name}")[0] == 200, 240, f"the node {name} did not register with the API server")
    mark_control_plane(admin, name, registration_taints(registration, control_plane=True))
    certificate_key = None
    if "--upload-certs" in flags:
        certificate_key = upload_certs(admin, init_config.get("certificateKey"))
        print("[upload-certs] Storing the certificates in Secret \"kubeadm-certs\" in the \"kube-system\" Namespace")
    print("[bootstrap-token] Configured RBAC rules to allow Node Bootstrap tokens to get nodes")
    print("\nYour Kubernetes control-plane has initialized successfully!\n")
    if "--skip-token-print" not in flags:
        print("Then you can join any number of worker nodes by running the following on each as root:\n")
        print(f"kubeadm join {control_plane_endpoint} --token {printed_tokens[0]} \\\n\t--discovery-token-ca-cert-hash {ca_hash(ca_pem)}")
        if certificate_key:
            print(f"\t--control-plane --certificate-key {certificate_key}")
    return 0


def preflight(flags, port=None, control_plane=False):
    ignored = set(flags.get("--ignore-preflight-errors", "").lower().split(",")) - {""}
    errors = []
    if control_plane and os.path.exists(path("/etc/kubernetes/manifests/kube-apiserver.yaml")):
        errors.append(("FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml already exists"))
    if os.path.exists(path("/etc/kubernetes/kubelet.conf")):
        errors.append(("FileAvailable--etc-kubernetes-kubelet.conf", "/etc/kubernetes/kubelet.conf already exists"))
    if swap_on():
        errors.append(("Swap", "running with swap on is not supported. Please disable swap"))
    socket_path = os.environ.get("KUBE_DOUBLE_CRI_SOCKET", "/run/containerd/containerd.sock")
    if not os.path.exists(socket_path):
        errors.append(("CRI", f"container runtime is not running: validate service connection: validate CRI v1 runtime API for endpoint "
                              f'"unix://{socket_path}": rpc error: code = Unavailable desc = connection error: dial unix {socket_path}: '
                              f'connect: no such file or directory'))
    errors = [(name, message) for name, message in errors if name.lower() not in ignored and "all" not in ignored]
    if errors:
        raise Fail("[preflight] Some fatal errors occurred:\n" + "".join(f"\t[ERROR {name}]: {message}\n" for name, message in errors)
                   + "[preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`\n"
                   + "error execution phase preflight: preflight checks failed")


def mark_control_plane(admin, name, taints):
    """kubeadm's mark-control-plane phase (init and a control-plane join): the control-plane labels and the taints."""
    print(f"[mark-control-plane] Marking the node {name} as control-plane by adding the labels: "
          "[node-role.kubernetes.io/control-plane node.kubernetes.io/exclude-from-external-load-balancers]")
    labels = {"node-role.kubernetes.io/control-plane": "", "node.kubernetes.io/exclude-from-external-load-balancers": ""}
    admin.call("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": labels}, "spec": {"taints": taints}}, "application/merge-patch+json")


def restart_kubelet():
    if os.environ.get("KUBE_DOUBLE_KUBELET") == "spawn":
        # Tests: no systemd; (re)start kubelet as a process that outlives kubeadm, like the unit would.
        if os.path.exists(path("/var/run/kubelet.pid")):
            try:
                os.killpg(int(read_file("/var/run/kubelet.pid")), 15)
            except ProcessLookupError:
                pass
        os.makedirs(path("/var/log"), exist_ok=True)
        with open(path("/var/log/kubelet.log"), "a", encoding="utf-8") as log:
            process = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "kubelet"), *kubelet_flags()],
                                       stdout=log, stderr=log, start_new_session=True, env=os.environ)
        write_file("/var/run/kubelet.pid", str(process.pid))
        return
    subprocess.run(["systemctl", "restart", "kubelet"], check=True)


def kubelet_flags():
    """What the kubeadm drop-in of kubelet.service passes (KUBELET_KUBEADM_ARGS and KUBELET_EXTRA_ARGS)."""
    flags = ["--config=/var/lib/kubelet/config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf"]
    for name in ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"):
        if os.path.exists(path(name)):
            for line in read_file(name).splitlines():
                if "=" in line and not line.startswith("#"):
                    flags += [flag for word in shlex.split(line.split("=", 1)[1]) for flag in word.split()]
    return flags


def wait_for(check, seconds, message):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Fail:
            pass
        time.sleep(0.5)
    raise Fail(message)


def init_phase(arguments):
    if arguments[:1] != ["upload-certs"]:
        raise Fail(f"kubeadm (lab double): `kubeadm init phase {' '.join(arguments[:1])}` is not modelled", EXIT_LAB_ERROR)
    flags, _arguments = parse_flags(arguments[1:], COMMON_FLAGS, {"--upload-certs", "--skip-certificate-key-print"})
    admin = Client.from_kubeconfig(flags.get("--kubeconfig", "/etc/kubernetes/admin.conf"))
    init_config = load_config(flags["--config"]).get("InitConfiguration", {}) if "--config" in flags else {}
    key = upload_certs(admin, flags.get("--certificate-key") or init_config.get("certificateKey"))
    print("[upload-certs] Storing the certificates in Secret \"kubeadm-certs\" in the \"kube-system\" Namespace")
    print("[upload-certs] Using certificate key:")
    print(key)
    return 0


def join(arguments):
    flags, _arguments = parse_flags(arguments, COMMON_FLAGS, {"--control-plane", "--dry-run"})
    if "--config" not in flags:
        raise Fail("kubeadm (lab double): only `kubeadm join --config` is modelled", EXIT_LAB_ERROR)
    config = load_config(flags["--config"]).get("JoinConfiguration")
    if config is None:
        raise Fail("no JoinConfiguration found in the config file")
    registration = config.get("nodeRegistration") or {}
    name = registration.get("name") or socket.gethostname()
    control_plane = config.get("controlPlane")
    print("[preflight] Running pre-flight checks")
    preflight(flags, control_plane=bool(control_plane))
    discovery = (config.get("discovery") or {}).get("bootstrapToken") or {}
    token_string = discovery.get("token") or (config.get("discovery") or {}).get("tlsBootstrapToken", "")
    match = TOKEN_RE.match(token_string)
    if not match:
        raise Fail('discovery.bootstrapToken.token: Invalid value: "": the bootstrap token is invalid')
    endpoint = discovery.get("apiServerEndpoint", "")
    server = f"https://{endpoint}"
    pins = discovery.get("caCertHashes") or []
    if not pins and not discovery.get("unsafeSkipCAVerification"):
        raise Fail("discovery.bootstrapToken: Invalid value: \"\": using token-based discovery without caCertHashes can be unsafe. "
                   "Set unsafeSkipCAVerification as true in your kubeadm config file or pass --discovery-token-unsafe-skip-ca-verification flag to continue")

    insecure = Client(server, timeout=10)
    print(f'[discovery] Trying to connect to API Server "{endpoint}"')
    status, info = insecure.request("GET", "/api/v1/namespaces/kube-public/configmaps/cluster-info")
    if status != 200:
        raise Fail(f'couldn\'t validate the identity of the API Server: failed to request the cluster-info ConfigMap: '
                   f'{info.get("message", status) if isinstance(info, dict) else status}')
    signature = info["data"].get(f"jws-kubeconfig-{match.group(1)}")
    if signature is None:
        raise Fail(f'couldn\'t validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID '
                   f'"{match.group(1)}"')
    if not hmac.compare_digest(signature, jws(info["data"]["kubeconfig"], match.group(1), match.group(2))):
        raise Fail('couldn\'t validate the identity of the API Server: failed to verify JWS signature of received cluster info object, '
                   'can\'t trust this API Server')
    cluster_info = yaml.safe_load(info["data"]["kubeconfig"])
    ca_pem = unb64(cluster_info["clusters"][0]["cluster"]["certificate-authority-data"])
    actual = ca_hash(ca_pem)
    if pins and actual not in [pin.lower() for pin in pins]:
        raise Fail(f'couldn\'t validate the identity of the API Server: cluster CA found in cluster-info ConfigMap is invalid: '
                   f'none of the public keys "{actual}" are pinned')
    print(f'[discovery] Cluster info signature and contents are valid and TLS certificate validates against pinned roots, will use API Server "{endpoint}"')
    cluster_server = cluster_info["clusters"][0]["cluster"]["server"]

    registration = dict(registration, taints=registration_taints(registration, control_plane=bool(control_plane)))
    bootstrap = Client(cluster_server, ca_pem, token=token_string)
    if control_plane:
        address = prepare_control_plane(bootstrap, name, control_plane, control_plane.get("certificateKey") or flags.get("--certificate-key"), ca_pem)
    write_file("/etc/kubernetes/pki/ca.crt", ca_pem)
    write_file("/etc/kubernetes/bootstrap-kubelet.conf", kubeconfig("kubernetes", cluster_server, ca_pem, "tls-bootstrap-token-user", token=token_string),
               0o600)
    kubelet_config = bootstrap.call("GET", "/api/v1/namespaces/kube-system/configmaps/kubelet-config")
    print("[kubelet-start] Writing kubelet configuration to file \"/var/lib/kubelet/config.yaml\"")
    write_file("/var/lib/kubelet/config.yaml", kubelet_config["data"]["kubelet"])
    write_kubeadm_flags(registration)

    print("[kubelet-start] Starting the kubelet")
    with tempfile.TemporaryDirectory() as scratch:
        key = os.path.join(scratch, "key")
        subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
        csr = openssl("req", "-new", "-key", key, "-subj", f"/O=system:nodes/CN=system:node:{name}")
        with open(key, encoding="utf-8") as handle:
            key_pem = handle.read()
    request = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"generateName": "csr-"},
               "spec": {"request": b64(csr), "signerName": "kubernetes.io/kube-apiserver-client-kubelet", "usages": ["digital signature", "client auth"]}}
    signed = bootstrap.call("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", request)
    write_file("/var/lib/kubelet/pki/kubelet-client-current.pem", unb64(signed["status"]["certificate"]) + key_pem, 0o600)
    config_yaml = yaml.safe_load(kubeconfig("default-cluster", cluster_server, ca_pem, "default-auth"))
    config_yaml["users"][0]["user"] = {"client-certificate": "/var/lib/kubelet/pki/kubelet-client-current.pem",
                                       "client-key": "/var/lib/kubelet/pki/kubelet-client-current.pem"}
    write_file("/etc/kubernetes/kubelet.conf", yaml.safe_dump(config_yaml, sort_keys=False), 0o600)
    os.remove(path("/etc/kubernetes/bootstrap-kubelet.conf"))
    restart_kubelet()
    print("[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap")
    node_client = Client.from_kubeconfig("/etc/kubernetes/kubelet.conf", timeout=5)
    wait_for(lambda: node_client.request("GET", f"/api/v1/nodes/{name}")[0] == 200, 120,
             f"error execution phase kubelet-start: timed out waiting for the node {name} to register")
    if control_plane:
        admin = Client.from_kubeconfig("/etc/kubernetes/admin.conf", timeout=5)
        join_member(admin, name, address)
        mark_control_plane(admin, name, registration["taints"])
        print("\nThis node has joined the cluster and a new control plane instance was created:\n\n"
              "* Certificate signing request was sent to apiserver and approval was received.\n"
              "* The Kubelet was informed of the new secure connection details.\n"
              "* Control plane label and taint were applied to the new node.\n* The Kubernetes control plane instances scaled up.\n")
        return 0
    print("\nThis node has joined the cluster:\n* Certificate signing request was sent to apiserver and a response was received.\n"
          "* The Kubelet was informed of the new secure connection details.\n\nRun 'kubectl get nodes' on the control-plane to see this node join the cluster.")
    return 0


def prepare_control_plane(bootstrap, name, control_plane, certificate_key, ca_pem):
    """The control-plane-prepare phases of `join --control-plane`: the shared certificates from the kubeadm-certs Secret,
    this node's own certificates and kubeconfigs, and its static pod manifests (kubelet does not serve a second API: the
    lab's cluster keeps one API server and one etcd store, on the first control plane). Returns the node's advertise address."""
    if not certificate_key:
        raise Fail("error execution phase control-plane-prepare/download-certs: the certificate key is required for a control-plane join "
                   "(controlPlane.certificateKey or --certificate-key)")
    cluster = yaml.safe_load(bootstrap.call("GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")["data"]["ClusterConfiguration"])
    endpoint = cluster.get("controlPlaneEndpoint")
    if not endpoint:
        raise Fail("error execution phase preflight: \nOne or more conditions for hosting a new control plane instance is not satisfied.\n\n"
                   "unable to add a new control plane instance to a cluster that doesn't have a stable controlPlaneEndpoint address\n\n"
                   "Please ensure that:\n* The cluster has a stable controlPlaneEndpoint address.\n* The certificates that must be shared among "
                   "control plane instances are provided.")
    print('[download-certs] Downloading the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace')
    status, secret = bootstrap.request("GET", "/api/v1/namespaces/kube-system/secrets/kubeadm-certs")
    if status == 404:
        raise Fail('error execution phase control-plane-prepare/download-certs: error downloading certs: error downloading the secret: Secret '
                   '"kubeadm-certs" was not found in the "kube-system" Namespace. This Secret might have expired. Please, run '
                   '`kubeadm init phase upload-certs --upload-certs` on a control plane to generate a new one')
    if status != 200:
        raise Fail(f"error execution phase control-plane-prepare/download-certs: error downloading certs: error downloading the secret: "
                   f"{secret.get('message', status) if isinstance(secret, dict) else status}")
    data = secret.get("data") or {}
    if unb64(data.get("certificate-key-sha256", "")) != hashlib.sha256(certificate_key.encode()).hexdigest():
        raise Fail("error execution phase control-plane-prepare/download-certs: error downloading certs: error decoding secret data with "
                   "provided key: cipher: message authentication failed")
    os.makedirs(path("/etc/kubernetes/pki/etcd"), exist_ok=True)
    for file_name in SHARED_CERTIFICATES:
        write_file(f"/etc/kubernetes/pki/{file_name}", unb64(data[file_name.replace("/", "-")]), 0o600 if file_name.endswith(".key") else 0o644)
    print("[certs] Using certificateDir folder \"/etc/kubernetes/pki\"")
    local = control_plane.get("localAPIEndpoint") or {}
    address, port = local.get("advertiseAddress") or node_address(), int(local.get("bindPort", 6443))
    networking = cluster.get("networking") or {}
    service_subnet = networking.get("serviceSubnet", "10.96.0.0/12")
    write_node_certs(name, address, endpoint, service_subnet, networking.get("dnsDomain", "cluster.local"))
    write_control_plane_kubeconfigs(name, cluster.get("clusterName", "kubernetes"), f"https://{endpoint}", address, port, ca_pem,
                                    ("admin.conf", "controller-manager.conf", "scheduler.conf"))
    print("[control-plane] Using manifest folder \"/etc/kubernetes/manifests\"")
    write_manifests(cluster, address, port, service_subnet, networking.get("podSubnet", ""))
    return address


def token(arguments):
    if not arguments:
        raise Fail("kubeadm (lab double): `kubeadm token` needs create, list or delete", EXIT_LAB_ERROR)
    command, rest = arguments[0], arguments[1:]
    flags, positional = parse_flags(rest, {"--kubeconfig", "--ttl", "--description", "--usages", "--groups", "-o", "--output", "--config", "-v", "--v"},
                                    {"--print-join-command"})
    admin = Client.from_kubeconfig(flags.get("--kubeconfig", "/etc/kubernetes/admin.conf"))
    if command == "create":
        secret = token_secret(positional[0] if positional else None, flags.get("--ttl", "24h0m0s"),
                              flags["--usages"].split(",") if "--usages" in flags else None,
                              flags["--groups"].split(",") if "--groups" in flags else None, flags.get("--description"))
        admin.call("POST", "/api/v1/namespaces/kube-system/secrets", secret)
        print(unb64(secret["data"]["token-id"]) + "." + unb64(secret["data"]["token-secret"]))
        return 0
    if command == "list":
        items = [item for item in admin.call("GET", "/api/v1/namespaces/kube-system/secrets")["items"] if item.get("type") == "bootstrap.kubernetes.io/token"]
        rows = []
        for item in items:
            data = {key: unb64(value) for key, value in item["data"].items()}
            expiration = data.get("expiration")
            ttl = "<forever>" if not expiration else f"{max(0, int((parse_rfc3339(expiration) - now()).total_seconds() // 60))}m"
            usages = ",".join(usage for usage in ("authentication", "signing") if data.get(f"usage-bootstrap-{usage}") == "true")
            rows.append((f"{data['token-id']}.{data['token-secret']}", ttl, expiration or "<never>", usages, data.get("description", "<none>"),
                         data.get("auth-extra-groups", "")))
        if flags.get("-o", flags.get("--output")) == "json":
            for row in rows:
                print(json.dumps({"kind": "BootstrapToken", "apiVersion": "output.kubeadm.k8s.io/v1alpha3", "token": row[0], "ttl": row[1],
                                  "expires": row[2], "usages": row[3].split(","), "description": row[4], "groups": row[5].split(",")}, indent=4))
            return 0
        print("TOKEN                     TTL         EXPIRES                USAGES                   DESCRIPTION   EXTRA GROUPS")
        for row in rows:
            print(f"{row[0]:<26}{row[1]:<12}{row[2]:<23}{row[3]:<25}{row[4]:<14}{row[5]}")
        return 0
    if command == "delete":
        for token_id in positional:
            admin.call("DELETE", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{token_id.split('.')[0]}")
            print(f'bootstrap token "{token_id.split(".")[0]}" deleted')
        return 0
    raise Fail(f"kubeadm (lab double): `kubeadm token {command}` is not modelled", EXIT_LAB_ERROR)
