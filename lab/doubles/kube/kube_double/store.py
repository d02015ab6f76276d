"""The double's etcd: the cluster's objects in one JSON file, the system namespaces, new objects, and the bootstrap tokens
that have not expired."""

import json
import os
import threading
import uuid

from kube_double.core import now, parse_rfc3339, path, rfc3339, unb64, write_file


# The etcd data directory of kubeadm's local etcd (the etcd manifest's --data-dir), and the file in it where a real member
# keeps its bbolt database: the double keeps the store's JSON there, so that losing /var/lib/etcd loses the cluster.
ETCD_DATA_DIR = "/var/lib/etcd"
STORE = ETCD_DATA_DIR + "/member/snap/db"
ETCD_MANIFEST = "/etc/kubernetes/manifests/etcd.yaml"


def etcd_serving():
    """Whether this node's etcd member answers: kubelet runs its static pod (the manifest is in place) on a data directory that
    holds a database. Without the manifest the member is stopped; without the data it does not come up (the lab's fault)."""
    return os.path.exists(path(ETCD_MANIFEST)) and os.path.exists(path(STORE))


# The namespaces kube-apiserver creates when it starts (its system namespaces controller).
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def write_store(data):
    # Compact: an indent makes json use its pure-Python encoder, about 8 times slower, and every write saves the whole store
    # (with the operators' CRDs in it, 125 ms instead of 15 ms a write).
    write_file(STORE, json.dumps(data, sort_keys=True), 0o600)


class Store:
    """The cluster's objects, persisted as one JSON file (the double's etcd): objects[<resource>[.<group>]][<ns>/<name> | <name>]."""

    def __init__(self):
        self.lock = threading.RLock()
        with open(path(STORE), encoding="utf-8") as handle:
            self.data = json.load(handle)
        namespaces = self.data["objects"].setdefault("namespaces", {})
        for name in SYSTEM_NAMESPACES:
            if name not in namespaces:
                created = new_object("Namespace", name, spec={"finalizers": ["kubernetes"]}, status={"phase": "Active"})
                created["metadata"]["labels"] = {"kubernetes.io/metadata.name": name}
                created["metadata"]["resourceVersion"] = self.next_version()
                namespaces[name] = created
        self.save()

    def save(self):
        write_store(self.data)

    def next_version(self):
        self.data["resourceVersion"] = self.data.get("resourceVersion", 1) + 1
        return str(self.data["resourceVersion"])

    def version(self):
        return str(self.data.get("resourceVersion", 1))


def new_object(kind, name, namespace=None, **fields):
    metadata = {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": rfc3339(now())}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata, **fields}


def valid_tokens(store):
    """{token id: secret object} of the bootstrap tokens that have not expired; expired ones are deleted."""
    secrets_ = store.data["objects"].setdefault("secrets", {})
    tokens = {}
    for key, secret in list(secrets_.items()):
        if secret.get("type") != "bootstrap.kubernetes.io/token":
            continue
        data = {name: unb64(value) for name, value in secret["data"].items()}
        if "expiration" in data and parse_rfc3339(data["expiration"]) <= now():
            del secrets_[key]  # the token cleaner controller of kube-controller-manager
            continue
        tokens[data["token-id"]] = data
    return tokens
