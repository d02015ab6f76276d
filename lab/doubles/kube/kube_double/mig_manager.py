"""The GPU Operator's mig-manager, as the k8s-mig-manager v0.15.0 image that GPU Operator v26.7.0 deploys runs it
(NVIDIA/mig-parted: cmd/nvidia-mig-manager/main.go, pkg/mig/reconfigure/reconfigure.go), played by kubelet for the pod."""

import sys
import time
import urllib.parse

from kube_double.api_access import GPU_CLIENT_DEPLOY_LABEL, MIG_CONFIG_STATE_LABEL, MIG_MANAGER_POD_LABEL, MIG_PAUSED_DEPLOY_LABELS
from kube_double.core import Fail
from kube_double.mig_parted import MigParted, MigPartedError, parse_mig_parted_config, select_mig_config
from kube_double.workloads import controller_reference, running_pod


MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # cmd/nvidia-mig-manager/main.go MigConfigLabel


MIG_PAUSED = "paused-for-mig-change"


# reconfigure.go waitForPodsToBeDeleted: the pods waited for, in order, each for at most 5 minutes (app labels, in the
# DEFAULT_GPU_CLIENTS_NAMESPACE), then DaemonSet pods of any namespace whose nodeSelector has nvidia.com/gpu.deploy.client.
MIG_WAITED_PODS = (("app=nvidia-device-plugin-daemonset", "device-plugin pod did not shutdown"),
                   ("app=gpu-feature-discovery", "gpu-feature-discovery pod did not shutdown"),
                   ("app=nvidia-dcgm-exporter", "dcgm-exporter pod did not shutdown"),
                   ("app=nvidia-dcgm", "dcgm pod did not shutdown"),
                   (None, "third-party gpu client pods did not shutdown"))


MIG_POD_WAIT_SECONDS = 300


MIG_MANAGER_FIELD_MANAGER = "nvidia-mig-manager"  # client-go's default: the program's name


class MigManagerNotStarted(Exception):
    """The mig-manager container cannot run (no config file, a bad flag): it restarts, and writes no label."""


def parse_bool(text):
    """strconv.ParseBool, as urfave/cli reads a boolean flag from its environment variable."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(text)


def pod_container_env(pod, container):
    """A container's environment as kubelet gives it: literal values and the downward API's metadata.name, metadata.namespace,
    spec.nodeName (other sources are left out)."""
    fields = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"].get("namespace", ""),
              "spec.nodeName": (pod.get("spec") or {}).get("nodeName", "")}
    env = {}
    for variable in container.get("env") or []:
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
        elif ((variable.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") in fields:
            env[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def mig_manager_options(pod):
    """cmd/nvidia-mig-manager/main.go flags from the container's environment: the config file (CONFIG_FILE; without it the real
    v0.15 generates one from the GPUs and falls back to DEFAULT_CONFIG_FILE when it finds no MIG profile: the double always takes
    DEFAULT_CONFIG_FILE), WITH_REBOOT, DEFAULT_GPU_CLIENTS_NAMESPACE (default "default")."""
    containers = (pod.get("spec") or {}).get("containers") or []
    container = next((c for c in containers if c.get("name") == "nvidia-mig-manager"), containers[0] if containers else {})
    env = pod_container_env(pod, container)
    config_file = env.get("CONFIG_FILE") or env.get("DEFAULT_CONFIG_FILE")
    if not config_file:
        raise MigManagerNotStarted("failed to setup MIG config: neither CONFIG_FILE nor DEFAULT_CONFIG_FILE is set (the lab double does not "
                                   "generate a config from the GPUs, pkg/mig/builder)")
    try:
        with_reboot = parse_bool(env.get("WITH_REBOOT", "false"))
    except ValueError:
        raise MigManagerNotStarted(f'invalid value "{env["WITH_REBOOT"]}" for flag -with-reboot (WITH_REBOOT): parse error') from None
    return {"container": container, "config_file": config_file, "with_reboot": with_reboot,
            "namespace": env.get("DEFAULT_GPU_CLIENTS_NAMESPACE") or "default"}


def mig_config_source(pod, container, config_file):
    """The ConfigMap and key behind the config file: the container's volumeMount of a configMap volume that holds the path
    (the longest mountPath; subPath and the volume's items honoured); None when no ConfigMap volume holds it."""
    volumes = {volume.get("name"): volume for volume in (pod.get("spec") or {}).get("volumes") or []}
    found, longest = None, -1
    for mount in container.get("volumeMounts") or []:
        config_map = (volumes.get(mount.get("name")) or {}).get("configMap")
        mount_path = (mount.get("mountPath") or "").rstrip("/")
        if not config_map:
            continue
        if mount.get("subPath"):
            relative = mount["subPath"] if config_file == mount_path else None
        else:
            relative = config_file[len(mount_path) + 1:] if config_file.startswith(mount_path + "/") else None
        if relative is None or len(mount_path) <= longest:
            continue
        items = config_map.get("items")
        key = next((item.get("key") for item in items if item.get("path") == relative), None) if items else relative
        found, longest = (config_map.get("name"), key), len(mount_path)
    return found


def read_mig_config(client, pod, options):
    """The mig-parted config file's text, read from the ConfigMap the pod mounts (a node may get it: see ApiHandler.allowed)."""
    source = mig_config_source(pod, options["container"], options["config_file"])
    missing = f"failed to setup MIG config: failed to read custom config {options['config_file']}: stat {options['config_file']}: no such file or directory"
    if not source or not source[1]:
        raise MigManagerNotStarted(missing + " (the lab double reads the config only from a configMap volume)")
    name, key = source
    status, answer = client.request("GET", f"/api/v1/namespaces/{pod['metadata']['namespace']}/configmaps/{name}")
    if status == 404:
        raise MigManagerNotStarted(f'MountVolume.SetUp failed for volume of configmap "{name}": configmap "{name}" not found')
    if status >= 400:
        raise Fail(f"reading configmap {name}: {answer.get('message', answer) if isinstance(answer, dict) else answer}")
    data = answer.get("data") or {}
    if key not in data:
        raise MigManagerNotStarted(missing)
    return data[key]


def maybe_set(saved, value):
    """reconfigure.go maybeSetPaused / maybeSetTrue: a deploy label the operator (or a user) set to "false" keeps it; any other value,
    an absent label included, becomes the given one."""
    return "false" if saved == "false" else value


class MigReconfiguration:
    """pkg/mig/reconfigure/reconfigure.go Run() for one value of nvidia.com/mig.config, spread over kubelet's heartbeats: it starts
    (labels read, config validated, asserted, pending, components paused), waits at later heartbeats for the paused components'
    pods to go, then applies and reports in one heartbeat. `run` is its record in kubelet's memory."""

    def __init__(self, client, node, pod, manager, options):
        self.client, self.node_name, self.pod, self.manager, self.options = client, node["metadata"]["name"], pod, manager, options
        self.labels = dict(node["metadata"].get("labels") or {})
        self.where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"

    def log(self, message, failure=True):
        print(f"kubelet: mig-manager {self.where}{' (lab double)' if failure else ''}: {message}", file=sys.stderr)

    def set_labels(self, wanted):
        """reconfigure.go setNodeLabels: a merge patch of the Node's labels (only those that differ: nothing is written otherwise)."""
        changed = {key: value for key, value in wanted.items() if self.labels.get(key) != value}
        if changed:
            query = urllib.parse.urlencode({"fieldManager": MIG_MANAGER_FIELD_MANAGER})
            node = self.client.call("PATCH", f"/api/v1/nodes/{self.node_name}?{query}", {"metadata": {"labels": changed}}, "application/merge-patch+json")
            self.labels = dict(node["metadata"].get("labels") or {})

    def deploy_labels(self, run, value):
        labels = {label: maybe_set(run["saved"].get(label, ""), value) for label in MIG_PAUSED_DEPLOY_LABELS}
        if run["saved"].get(GPU_CLIENT_DEPLOY_LABEL):
            labels[GPU_CLIENT_DEPLOY_LABEL] = maybe_set(run["saved"][GPU_CLIENT_DEPLOY_LABEL], value)
        return labels

    def set_state(self, run, state):
        """reconfigure.go setState: the deploy labels back to true (not those set to false) unless this mig-manager process has
        restarted them before (NoRestartK8sDaemonsetsOnExit, a package variable that restartKubernetesGPUClients sets and nothing
        resets: after one success, a later failure of the same process leaves the components paused), then the state label."""
        if not self.manager.get("no_restart_on_exit"):
            self.set_labels(self.deploy_labels(run, "true"))
        self.set_labels({MIG_CONFIG_STATE_LABEL: state})

    def fail(self, run, message):
        """setState(failed), then the error, as main.go logs what Run() returned."""
        self.manager["run"] = None
        try:
            self.set_state(run, "failed")
        except Fail as error:
            self.log(f"unable to set '{MIG_CONFIG_STATE_LABEL}' to 'failed': {error}")
        self.log(message)

    def start(self, value, config_text):
        """Run() up to the wait: getCurrentNodeLabels, validateMigConfig (assert --valid-config), isConfigAlreadyApplied (assert),
        checkMigModeChangeRequired (assert --mode-only), pending, shutdownKubernetesGPUClients."""
        run = {"config": value, "saved": {label: self.labels.get(label, "") for label in MIG_PAUSED_DEPLOY_LABELS + (GPU_CLIENT_DEPLOY_LABEL,)},
               "state": self.labels.get(MIG_CONFIG_STATE_LABEL, ""), "stage": 0, "since": time.monotonic()}
        self.manager["run"] = run
        try:
            entries = select_mig_config(parse_mig_parted_config(config_text), value)
        except MigPartedError as error:
            return self.fail(run, f"failed to validate MIG configuration: {error}")
        run["entries"] = entries
        parted = MigParted(entries)
        try:
            applied, mode_applied = parted.assert_config() is None, parted.assert_mode() is None
        except MigPartedError:
            applied = mode_applied = False  # the assertion fails; apply will say why
        try:
            if applied:
                self.set_state(run, "success")
                self.manager["run"] = None
                return self.log(f"selected MIG config is already applied: successfully updated to MIG config: {value}", failure=False)
            if not mode_applied and run["state"] == "rebooting":
                return self.fail(run, "failed to check if a MIG mode change is required: MIG mode change did not take effect after rebooting")
            self.set_labels({MIG_CONFIG_STATE_LABEL: "pending"})
            self.set_labels(self.deploy_labels(run, MIG_PAUSED))
        except Fail as error:
            return self.fail(run, f"failed to set state to pending or to shutdown Kubernetes GPU clients: {error}")
        self.log(f"updating to MIG config: {value}: waiting for the GPU clients to shutdown", failure=False)
        return None

    def waiting_for(self, pods, stage):
        selector, dummy = MIG_WAITED_PODS[stage]
        if selector:
            key, value = selector.split("=")
            return [pod for pod in pods if pod["metadata"].get("namespace") == self.options["namespace"]
                    and (pod["metadata"].get("labels") or {}).get(key) == value]
        return [pod for pod in pods if (controller_reference(pod) or {}).get("kind") == "DaemonSet"
                and GPU_CLIENT_DEPLOY_LABEL in ((pod.get("spec") or {}).get("nodeSelector") or {})]

    def delete_pods(self, pods, app):
        for pod in pods:
            if pod["metadata"].get("namespace") == self.options["namespace"] and (pod["metadata"].get("labels") or {}).get("app") == app:
                status, answer = self.client.request("DELETE", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}")
                if status >= 400 and status != 404:
                    raise Fail(f"failed to delete pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: "
                               f"{answer.get('message', answer) if isinstance(answer, dict) else answer}")

    def resume(self, run, pods):
        """Run() from waitForPodsToBeDeleted on: at each heartbeat the next stage whose pods are gone; past 5 minutes on one, Run()
        returns its error without setState (v0.15.0: the state stays pending and the components paused, NVIDIA/mig-parted#485).
        Then the validator pods go, the MIG mode, the config, the operator validator is restarted, the components, success."""
        while run["stage"] < len(MIG_WAITED_PODS):
            if self.waiting_for(pods, run["stage"]):
                if time.monotonic() - run["since"] > MIG_POD_WAIT_SECONDS:
                    self.manager["run"] = None
                    self.log(f"failed to wait for pods to be deleted: {MIG_WAITED_PODS[run['stage']][1]}: context deadline exceeded")
                return
            run["stage"], run["since"] = run["stage"] + 1, time.monotonic()
        try:
            self.delete_pods(pods, "nvidia-cuda-validator")
            self.delete_pods(pods, "nvidia-device-plugin-validator")
        except Fail as error:
            self.manager["run"] = None
            return self.log(f"failed to wait for pods to be deleted: {error}")
        parted = MigParted(run["entries"])
        try:
            # applyMigModeChange: apply --mode-only, then assert --mode-only.
            parted.apply(mode_only=True)
            mode_error = parted.assert_mode()
        except MigPartedError as error:
            mode_error = str(error)
        if mode_error and self.options["with_reboot"]:
            try:
                self.set_labels({MIG_CONFIG_STATE_LABEL: "rebooting"})
            except Fail as error:
                return self.fail(run, f"unable to set the value of '{MIG_CONFIG_STATE_LABEL}' to 'rebooting': {error}")
            self.manager["run"] = None
            return self.log(f"failed to apply MIG mode change ({mode_error}); WITH_REBOOT: rebooting the node (chroot /host reboot) is not "
                            f"modelled: the state stays rebooting; a reboot (the nvidia-smi double's boots) and a new mig-manager pod finish it")
        try:
            parted.apply()  # applyMigConfig: apply (no assertion after it: a GPU no entry selects does not stop a success)
        except MigPartedError as error:
            return self.fail(run, f"failed to apply MIG configuration: error applying MIG configuration with hooks: {error}")
        try:
            self.delete_pods(pods, "nvidia-operator-validator")  # restartValidatorPod
        except Fail as error:
            self.manager["run"] = None
            return self.log(f"failed to restart validator pod: {error}")
        try:
            self.manager["no_restart_on_exit"] = True
            self.set_labels(self.deploy_labels(run, "true"))  # restartKubernetesGPUClients
        except Fail as error:
            return self.fail(run, f"failed to restart Kubernetes GPU clients: {error}")
        self.set_state(run, "success")
        self.manager["run"] = None
        return self.log(f"successfully updated to MIG config: {run['config']}", failure=False)


def sync_mig_manager(client, node, pods, state):
    """The GPU Operator's mig-manager, while its pod runs on this node (cmd/nvidia-mig-manager/main.go): it reacts to a value of the
    node's nvidia.com/mig.config label that differs from the last one it read (SyncableMigConfig: a new pod, or a restarted kubelet,
    reads the current value once; an absent label is ignored; a failed value is not retried until the label changes) by a
    reconfiguration (MigReconfiguration), one at a time. Each heartbeat does one step of it."""
    pod = running_pod(pods, MIG_MANAGER_POD_LABEL)
    if pod is None:
        state["mig_manager"] = {}
        return
    manager = state.get("mig_manager") or {}
    if manager.get("pod") != pod["metadata"]["uid"]:
        manager = state["mig_manager"] = {"pod": pod["metadata"]["uid"]}  # a new process: nothing read yet
    where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    try:
        options = mig_manager_options(pod)
        run = manager.get("run")
        if run is not None:
            MigReconfiguration(client, node, pod, manager, options).resume(run, pods)
            return
        value = (node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL) or ""
        if not value or value == manager.get("last_read"):
            return
        config_text = read_mig_config(client, pod, options)
        manager.update(last_read=value, error=None)
        MigReconfiguration(client, node, pod, manager, options).start(value, config_text)
    except MigManagerNotStarted as error:
        if str(error) != manager.get("error"):
            print(f"kubelet: mig-manager {where} (lab double): {error}", file=sys.stderr)
        manager["error"] = str(error)
