"""Stand-in for kubeadm, kubelet and kubectl (and the kube-apiserver they talk to) in the onprem.gpu lab.

A Python 3 package (plus PyYAML and the openssl command) of layered modules, each importing only from the layers below it:
core; pki, client; store, patch, fields; the API (selectors, protobuf, resources, workloads, the api_* parts of the request
handler, apiserver); the controllers (daemonsets, pods); the GPU operands (device_plugin, mig_parted, mig_manager); kubelet,
kubeadm (kubeadm_config, kubeadm_files); cli. The lab mirror packs it into one executable zip application (lab/mirror/build.py)
that the lab packages install as /usr/bin/kubeadm, /usr/bin/kubelet and /usr/bin/kubectl; it acts as the program it is called as.

- kubeadm init writes what the real one writes (a CA and certificates made with openssl under
  /etc/kubernetes/pki, the *.conf kubeconfigs, static pod manifests, /var/lib/kubelet/config.yaml and
  kubeadm-flags.env, the cluster's initial objects), starts kubelet and marks the control plane.
- kubelet, on a node with /etc/kubernetes/manifests/kube-apiserver.yaml, "runs the static pod": it serves
  a Kubernetes API over HTTPS (client certificates and bootstrap tokens, the real paths and JSON) at the
  advertise address and port, keeping the cluster's objects in /var/lib/etcd/member/snap/db: discovery
  (legacy and aggregated), built-in kinds and CRD-defined kinds with selectors, the four patch types
  (server-side apply with managedFields), status subresources, the Eviction API with PodDisruptionBudgets,
  Tables for kubectl get. Real kubectl, the kubernetes Python client and kubernetes.core work against it.
  Every kubelet registers its Node (labels from --node-labels, taints from --register-with-taints) and heartbeats;
  after each heartbeat it does its node's part of the DaemonSet controller's work, reports the pods bound to it Running
  (no container runs), and, while an NVIDIA device plugin pod runs there, advertises the GPUs or MIG devices that
  nvidia-smi lists as the plugin's MIG strategy counts them; while the GPU Operator's mig-manager pod runs there, it
  applies the layout the node's nvidia.com/mig.config label names with nvidia-smi, as that mig-manager does.
- kubeadm join discovers the cluster through the cluster-info ConfigMap, checks the token's JWS signature
  and the pinned CA hash as the real one does, and gets its kubelet certificate through a CSR.
- kubectl answers get/patch on Nodes, Secrets and ConfigMaps and --raw, in the real JSON.

../README.md says what is not modelled and how the modules are laid out. Shares no code with the collection or the other doubles.
"""
