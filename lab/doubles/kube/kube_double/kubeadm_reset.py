"""kubeadm reset: what kubeadm init or join wrote on this node undone, as the Kubernetes documentation ("kubeadm reset")
and kubeadm's reset phases (preflight, remove-etcd-member, cleanup-node) describe it, with their output."""

import os
import shutil
import signal
import subprocess
import sys

from kube_double.client import Client
from kube_double.core import Fail, parse_flags, path, read_file
from kube_double.kubeadm_certs import klog_warning
from kube_double.kubeadm_etcd import remove_member
from kube_double.store import ETCD_DATA_DIR, ETCD_MANIFEST, STORE


# cleanup-node: the directories whose contents go, and the files (kubeadm's resetConfigDir and the kubeconfigs it wrote).
DIRECTORIES = ["/etc/kubernetes/manifests", "/var/lib/kubelet", "/etc/kubernetes/pki"]
FILES = ["/etc/kubernetes/admin.conf", "/etc/kubernetes/super-admin.conf", "/etc/kubernetes/kubelet.conf",
         "/etc/kubernetes/bootstrap-kubelet.conf", "/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf"]


def reset(arguments):
    flags, _positional = parse_flags(arguments, {"--cri-socket", "--cert-dir", "--ignore-preflight-errors", "--kubeconfig", "--config",
                                                 "--skip-phases", "-v", "--v"}, {"--force", "-f", "--dry-run", "--cleanup-tmp-dir"})
    control_plane = os.path.exists(path("/etc/kubernetes/manifests/kube-apiserver.yaml"))
    admin = None  # the cluster's client, once its kubeadm-config was read (kubeadm's reset configuration)
    if control_plane or os.path.exists(path("/etc/kubernetes/admin.conf")):
        print('[reset] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...')
        print("[reset] Use 'kubeadm init phase upload-config --config your-config-file' to re-upload it.")
        try:
            client = Client.from_kubeconfig(flags.get("--kubeconfig", "/etc/kubernetes/admin.conf"), timeout=5)
            client.call("GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
            admin = client
        except Fail as error:
            klog_warning("reset.go:124", f"[reset] Unable to fetch the kubeadm-config ConfigMap from cluster: {error}")
    klog_warning("reset.go:141", "[reset] WARNING: Changes made to this host by 'kubeadm init' or 'kubeadm join' will be reverted.")
    if "--force" not in flags and "-f" not in flags:
        print("[reset] Are you sure you want to proceed? [y/N]: ", end="", flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise Fail("error execution phase preflight: won't proceed; the user didn't answer (Y|y) in order to continue")
    print("[preflight] Running pre-flight checks")
    if os.path.exists(path(ETCD_MANIFEST)):
        # remove-etcd-member. A control plane that joined takes its member out of the cluster's membership on the first control
        # plane (a failure is a warning only, as in kubeadm). Without the kubeadm-config (the API unreachable) kubeadm removes
        # nothing and reads the data directory from the etcd manifest. The first control plane holds the lab's one etcd store:
        # its data goes with the node, members or not (kubeadm skips the removal of the last member; README, "Not modelled").
        if admin is None:
            klog_warning("removeetcdmember.go:103", "[reset] No kubeadm config, using etcd pod spec to get data directory")
        elif not os.path.exists(path(STORE)):
            remove_member(admin)
        if os.path.isdir(path(ETCD_DATA_DIR)):
            for entry in os.listdir(path(ETCD_DATA_DIR)):
                shutil.rmtree(os.path.join(path(ETCD_DATA_DIR), entry), ignore_errors=True)
        print(f"[reset] Deleted contents of the etcd data directory: {ETCD_DATA_DIR}")
    print("[reset] Stopping the kubelet service")
    stop_kubelet()
    print('[reset] Unmounting mounted directories in "/var/lib/kubelet"')
    print(f"[reset] Deleting contents of directories: [{' '.join(DIRECTORIES)}]")
    for directory in DIRECTORIES:
        if os.path.isdir(path(directory)):
            for entry in os.listdir(path(directory)):
                full = os.path.join(path(directory), entry)
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full)
                else:
                    os.remove(full)
    print(f"[reset] Deleting files: [{' '.join(FILES)}]")
    for name in FILES:
        if os.path.exists(path(name)):
            os.remove(path(name))
    print("\nThe reset process does not perform cleanup of CNI plugin configuration,\nnetwork filtering rules and kubeconfig files.\n\n"
          "For information on how to perform this cleanup manually, please see:\n    https://k8s.io/docs/reference/setup-tools/kubeadm/kubeadm-reset/\n")
    return 0


def stop_kubelet():
    if os.environ.get("KUBE_DOUBLE_KUBELET") == "spawn":
        # Tests: kubelet is a process kubeadm started (kubeadm.restart_kubelet), not a unit.
        try:
            os.killpg(int(read_file("/var/run/kubelet.pid")), signal.SIGTERM)
        except (FileNotFoundError, ProcessLookupError):
            pass
        return
    subprocess.run(["systemctl", "stop", "kubelet"], check=True)
