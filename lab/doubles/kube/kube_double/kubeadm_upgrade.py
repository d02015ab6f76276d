"""kubeadm upgrade plan, apply and node, as the Kubernetes documentation ("Upgrading kubeadm clusters") describes them and
kubeadm prints them: the cluster's version read from the kubeadm-config ConfigMap, the version policy of
cmd/kubeadm/app/phases/upgrade/policy.go (EnforceVersionPolicies: one minor at a time, kubeadm no older than the target,
kubelets no more than three minors behind it), the static pod manifests rewritten with the new image tags (the old ones
backed up), the kubelet configuration written from the kubelet-config ConfigMap. A lab fault knob makes `upgrade node`
fail midway (README.md)."""

import os
import socket
import sys
import time

import yaml

from kube_double.client import Client
from kube_double.core import EXIT_LAB_ERROR, Fail, now, parse_flags, path, read_file, version, write_file
from kube_double.store import STORE
from kube_double.versions import CONTROL_PLANE_COMPONENTS, MANIFESTS, manifest_version, parse, shown


# The lab's fault knob: while this file exists, `kubeadm upgrade node` fails in its kubelet-config phase, after its
# preflight, with the file's text as the error (a default sentence when it is empty). Remove it to clear the fault.
UPGRADE_NODE_FAULT = "/etc/kube-double/faults/kubeadm-upgrade-node"


# cmd/kubeadm/app/constants: MaximumAllowedMinorVersionUpgradeSkew, MaximumAllowedMinorVersionKubeletSkew.
MINOR_UPGRADE_SKEW = 1
KUBELET_SKEW = 3


UPGRADE_FLAGS = {"--config", "--kubeconfig", "-v", "--v", "--ignore-preflight-errors", "--certificate-renewal", "--etcd-upgrade", "--skip-phases"}


def upgrade(arguments):
    command, rest = (arguments[0], arguments[1:]) if arguments else ("", [])
    if command == "plan":
        return plan(rest)
    if command == "apply":
        return apply(rest)
    if command == "node":
        return node(rest)
    raise Fail(f"kubeadm (lab double): `kubeadm upgrade {command}` is not modelled: plan, apply, node (lab/doubles/kube/README.md)", EXIT_LAB_ERROR)


def admin_client(flags):
    name = flags.get("--kubeconfig", "/etc/kubernetes/admin.conf")
    if not os.path.exists(path(name)):
        raise Fail(f"couldn't create a Kubernetes client from file \"{name}\": failed to load admin kubeconfig: open {name}: no such file or directory\n"
                   "To see the stack trace of this error execute with --v=5 or higher")
    return Client.from_kubeconfig(name, timeout=10)


def node_client(flags):
    """upgrade node: the admin kubeconfig on a control plane, the kubelet's elsewhere (a worker has no admin.conf)."""
    for name in (flags.get("--kubeconfig"), "/etc/kubernetes/admin.conf", "/etc/kubernetes/kubelet.conf"):
        if name and os.path.exists(path(name)):
            return Client.from_kubeconfig(name, timeout=10)
    raise Fail("couldn't create a Kubernetes client from file \"/etc/kubernetes/kubelet.conf\": open /etc/kubernetes/kubelet.conf: no such file or directory")


def read_cluster(client, tag="upgrade"):
    print(f'[{tag}] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...')
    print(f"[{tag}] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.")
    configmap = client.call("GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
    cluster = yaml.safe_load(configmap["data"]["ClusterConfiguration"]) or {}
    current = parse(cluster.get("kubernetesVersion"))
    if current is None:
        raise Fail(f"the kubeadm-config ConfigMap holds no valid kubernetesVersion: {cluster.get('kubernetesVersion')!r}")
    return cluster, current


def kubelet_versions(admin):
    nodes = admin.call("GET", "/api/v1/nodes")["items"]
    return {node["metadata"]["name"]: node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "") for node in nodes}


def policy_errors(cluster_version, target, kubeadm_version, kubelets):
    """EnforceVersionPolicies: (mandatory, skippable) error lists."""
    mandatory, skippable = [], []
    if target < cluster_version:
        skippable.append(f'Specified version to upgrade to "{shown(target)}" is lower than the cluster version "{shown(cluster_version)}". '
                         "Downgrades are not supported yet")
    if target[1] > cluster_version[1] + MINOR_UPGRADE_SKEW:
        mandatory.append(f'Specified version to upgrade to "{shown(target)}" is too high; kubeadm can upgrade only {MINOR_UPGRADE_SKEW} minor '
                         "version at a time")
    if kubeadm_version < target:
        if target[1] > kubeadm_version[1]:
            mandatory.append(f'Specified version to upgrade to "{shown(target)}" is at least one minor release higher than the kubeadm minor '
                             f"release ({target[1]} > {kubeadm_version[1]}). Such an upgrade is not supported")
        else:
            skippable.append(f'Specified version to upgrade to "{shown(target)}" is higher than the kubeadm version "{shown(kubeadm_version)}". '
                             "Upgrade kubeadm first using the tool you used to install kubeadm")
    if kubeadm_version[1] > target[1]:
        skippable.append(f'Kubeadm version "{shown(kubeadm_version)}" can only be used to upgrade to Kubernetes version '
                         f'"v{kubeadm_version[0]}.{kubeadm_version[1]}"')
    too_old = sorted({text for text in kubelets.values() if parse(text) and parse(text)[1] + KUBELET_SKEW < target[1]})
    if too_old:
        skippable.append(f"There are kubelets in this cluster that are too old that have these versions [{' '.join(too_old)}]")
    return mandatory, skippable


def enforce(cluster_version, target, kubelets, force):
    mandatory, skippable = policy_errors(cluster_version, target, parse(version()), kubelets)
    listed = "".join(f"\t- {error}\n" for error in mandatory or skippable)
    if mandatory:
        raise Fail(f"[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n{listed}\n"
                   "Please fix the misalignments highlighted above and try upgrading again\nTo see the stack trace of this error execute with --v=5 or higher")
    if skippable and not force:
        raise Fail(f"[upgrade/version] FATAL: the --version argument is invalid due to these errors:\n\n{listed}\n"
                   "Can be bypassed if you pass the --force flag\nTo see the stack trace of this error execute with --v=5 or higher")
    if skippable:
        print(f"[upgrade/version] Found {len(skippable)} potential version compatibility errors but skipping since the --force flag is set: \n\n{listed}")


def plan(arguments):
    flags, positional = parse_flags(arguments, UPGRADE_FLAGS, {"--allow-experimental-upgrades", "--allow-release-candidate-upgrades", "--print-config"})
    admin = admin_client(flags)
    _cluster, current = read_cluster(admin, "upgrade/config")
    print("[preflight] Running pre-flight checks.")
    print("[upgrade] Running cluster health checks")
    print("[upgrade] Fetching available versions to upgrade to")
    print(f"[upgrade/versions] Cluster version: {shown(current)}")
    print(f"[upgrade/versions] kubeadm version: v{version()}")
    if positional:
        target = parse(positional[0])
        if target is None:
            raise Fail(f'unable to parse version "{positional[0]}"')
    else:
        # The lab has no internet: kubeadm falls back to its own version, as it does when dl.k8s.io cannot be reached.
        print('[upgrade/versions] WARNING: Couldn\'t fetch latest stable version from the internet: unable to get URL "https://dl.k8s.io/release/stable.txt"')
        print("[upgrade/versions] WARNING: Falling back to current kubeadm version as latest stable version")
        target = parse(version())
    kubelets = kubelet_versions(admin)
    enforce(current, target, kubelets, force=False)
    print(f"[upgrade/versions] Target version: {shown(target)}")
    print(f"[upgrade/versions] Latest version in the v{current[0]}.{current[1]} series: {shown(current)}\n")
    if target <= current:
        print("Awesome, you're up-to-date! Enjoy!")
        return 0
    print("Components that must be upgraded manually after you have upgraded the control plane with 'kubeadm upgrade apply':")
    table([("COMPONENT", "NODE", "CURRENT", "TARGET")] + [("kubelet", name, kubelet, shown(target)) for name, kubelet in sorted(kubelets.items())])
    print("\nUpgrade to the latest stable version:\n")
    host = socket.gethostname()
    rows = [("COMPONENT", "NODE", "CURRENT", "TARGET")]
    rows += [(component, host, "v" + (manifest_version(component) or f"{current[0]}.{current[1]}.{current[2]}"), shown(target))
             for component in CONTROL_PLANE_COMPONENTS]
    rows += [("kube-proxy", "", f"{current[0]}.{current[1]}.{current[2]}", shown(target)),
             ("etcd", host, manifest_version("etcd") or "", manifest_version("etcd") or "")]
    table(rows)
    print(f"\nYou can now apply the upgrade by executing the following command:\n\n\tkubeadm upgrade apply {shown(target)}\n")
    print("_" * 69 + "\n")
    return 0


def table(rows):
    widths = [max(len(row[column]) for row in rows) + 3 for column in range(len(rows[0]))]
    for row in rows:
        print("".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())


def apply(arguments):
    flags, positional = parse_flags(arguments, UPGRADE_FLAGS, {"-y", "--yes", "-f", "--force", "--dry-run", "--allow-experimental-upgrades",
                                                               "--allow-release-candidate-upgrades", "--print-config"})
    if not positional:
        raise Fail("missing one or more required arguments: [version]\nTo see the stack trace of this error execute with --v=5 or higher")
    target = parse(positional[0])
    if target is None:
        raise Fail(f'unable to parse version "{positional[0]}"')
    if "--dry-run" in flags:
        raise Fail("kubeadm (lab double): `kubeadm upgrade apply --dry-run` is not modelled", EXIT_LAB_ERROR)
    admin = admin_client(flags)
    cluster, current = read_cluster(admin)
    print("[upgrade/preflight] Running preflight checks")
    print("[upgrade] Running cluster health checks")
    status, _body = admin.request("GET", "/readyz")
    if status != 200:
        raise Fail(f"[upgrade/health] FATAL: the API server is not healthy: /readyz answered {status}")
    print(f'[upgrade/preflight] You have chosen to upgrade the cluster version to "{shown(target)}"')
    print(f"[upgrade/versions] Cluster version: {shown(current)}")
    print(f"[upgrade/versions] kubeadm version: v{version()}")
    force = "-f" in flags or "--force" in flags
    enforce(current, target, kubelet_versions(admin), force)
    if not (force or "-y" in flags or "--yes" in flags):
        print("[upgrade] Are you sure you want to proceed? [y/N]: ", end="", flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise Fail("won't proceed; the user didn't answer (Y|y) in order to continue")
    print("[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster")
    print(f'[upgrade/control-plane] Upgrading your static Pod-hosted control plane to version "{shown(target)}" (timeout: 5m0s)...')
    upgrade_static_pods(target, admin)
    print("[upgrade/control-plane] The control plane instance for this node was successfully upgraded!")
    cluster["kubernetesVersion"] = shown(target)
    admin.call("PATCH", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config",
               {"data": {"ClusterConfiguration": yaml.safe_dump(cluster)}}, "application/merge-patch+json")
    print('[upload-config] Storing the configuration used in ConfigMap "kubeadm-config" in the "kube-system" Namespace')
    print('[kubelet] Creating a ConfigMap "kubelet-config" in namespace kube-system with the configuration for the kubelets in the cluster')
    write_kubelet_config(admin)
    print("[upgrade/bootstrap-token] Configuring bootstrap token and cluster-info RBAC rules")
    print("[addons] Applied essential addon: CoreDNS")
    print("[addons] Applied essential addon: kube-proxy")
    print(f'\n[upgrade] SUCCESS! A control plane node of your cluster was upgraded to "{shown(target)}".\n')
    print("[upgrade] Now please proceed with upgrading the rest of the nodes by following the right order.")
    return 0


def node(arguments):
    flags, _positional = parse_flags(arguments, UPGRADE_FLAGS, {"--dry-run"})
    if "--dry-run" in flags:
        raise Fail("kubeadm (lab double): `kubeadm upgrade node --dry-run` is not modelled", EXIT_LAB_ERROR)
    client = node_client(flags)
    _cluster, current = read_cluster(client)
    print("[upgrade/preflight] Running pre-flight checks")
    control_plane = os.path.exists(path(f"{MANIFESTS}/kube-apiserver.yaml"))
    if control_plane:
        print("[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster")
    else:
        print("[upgrade/preflight] Skipping prepull. Not a control plane node.")
    if control_plane:
        print(f'[upgrade/control-plane] Upgrading your Static Pod-hosted control plane instance to version "{shown(current)}"...')
        upgrade_static_pods(current, client)
        print("[upgrade/control-plane] The control plane instance for this node was successfully upgraded!")
    else:
        print("[upgrade/control-plane] Skipping phase. Not a control plane node.")
        print("[upgrade/kubeconfig] Skipping phase. Not a control plane node.")
    if os.path.exists(path(UPGRADE_NODE_FAULT)):
        reason = read_file(UPGRADE_NODE_FAULT).strip() or ("could not write the kubelet configuration to \"/var/lib/kubelet/config.yaml\" "
                                                           f"(lab fault knob {UPGRADE_NODE_FAULT})")
        raise Fail(f"error execution phase kubelet-config: {reason}\nTo see the stack trace of this error execute with --v=5 or higher")
    write_kubelet_config(client)
    if not control_plane:
        print("[upgrade/addon] Skipping the addon/coredns phase. Not a control plane node.")
        print("[upgrade/addon] Skipping the addon/kube-proxy phase. Not a control plane node.")
    print("[upgrade] The configuration for this node was successfully upgraded!")
    print("[upgrade] Now you should go ahead and upgrade the kubelet package using your package manager.")
    return 0


def upgrade_static_pods(target, client):
    """The control-plane phase: each component's manifest with the new image tag, the old one backed up; a manifest that
    would not change is left as it is (a re-run). kubelet restarts the API server it serves from a changed manifest: on the
    node that serves the cluster's API, kubeadm waits until it answers at the new version."""
    stamp = now().strftime("%Y-%m-%d-%H-%M-%S")
    backup = f"/etc/kubernetes/tmp/kubeadm-backup-manifests-{stamp}"
    print(f'[upgrade/staticpods] Writing new Static Pod manifests to "/etc/kubernetes/tmp/kubeadm-upgraded-manifests-{stamp}"')
    for component in CONTROL_PLANE_COMPONENTS + ("etcd",):
        name = f"{MANIFESTS}/{component}.yaml"
        text = read_file(name)
        manifest = yaml.safe_load(text)
        container = manifest["spec"]["containers"][0]
        repository = container["image"].rsplit(":", 1)[0]
        wanted = container["image"] if component == "etcd" else f"{repository}:{shown(target)}"
        if wanted == container["image"]:
            print(f"[upgrade/staticpods] Current and new manifests of {component} are equal, skipping upgrade")
            continue
        write_file(f"{backup}/{component}.yaml", text, 0o600)
        container["image"] = wanted
        write_file(name, yaml.safe_dump(manifest, sort_keys=False), 0o600)
        print(f'[upgrade/staticpods] Moving new manifest to "{name}" and backing up old manifest to "{backup}/{component}.yaml"')
        print("[upgrade/staticpods] Waiting for the kubelet to restart the component")
        print("[upgrade/staticpods] This can take up to 5m0s")
        if component == "kube-apiserver" and os.path.exists(path(STORE)):
            wait_for_api(client, target)
        print(f"[apiclient] Found 1 Pods for label selector component={component}")
        print(f'[upgrade/staticpods] Component "{component}" upgraded successfully!')


def wait_for_api(client, target, seconds=300):
    """Until the restarted API server answers at the new version (connections fail while kubelet restarts it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status, body = client.request("GET", "/version")
            if status == 200 and parse(body.get("gitVersion")) == target and client.request("GET", "/readyz")[0] == 200:
                return
        except Fail:
            pass
        time.sleep(0.5)
    raise Fail("[upgrade/staticpods] FATAL: couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state. "
               f"Errors faced: timed out waiting for the condition: the API server does not answer at {shown(target)}")


def write_kubelet_config(client):
    print('[upgrade/kubelet-config] Writing kubelet configuration to file "/var/lib/kubelet/config.yaml"')
    configmap = client.call("GET", "/api/v1/namespaces/kube-system/configmaps/kubelet-config")
    write_file("/var/lib/kubelet/config.yaml", configmap["data"]["kubelet"])
    print("[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!")
