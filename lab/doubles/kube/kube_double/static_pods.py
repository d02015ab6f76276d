"""kubelet's static pod of the API server followed at every heartbeat: stopped when its manifest leaves the manifest directory,
started again (with the certificates on disk then) when it comes back or changes, as kubelet's file source does every
fileCheckFrequency (the "Certificate Management with kubeadm" way to restart a control-plane component after a renewal). It
starts only while the node's etcd serves (store.etcd_serving): the etcd disaster-recovery procedure moves the manifests out,
restores the data directory and moves them back."""

import sys

import yaml

from kube_double.apiserver import serve_api
from kube_double.core import read_file
from kube_double.store import etcd_serving


class StaticApiServer:
    """The kube-apiserver static pod of this node: `sync` after each heartbeat."""

    def __init__(self, manifest_file, server=None):
        self.manifest_file, self.server = manifest_file, server
        self.manifest = self.read_manifest() if server else None

    def read_manifest(self):
        try:
            return read_file(self.manifest_file)
        except FileNotFoundError:
            return None

    def sync(self):
        manifest = self.read_manifest()
        if self.server is not None and manifest != self.manifest:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
            print("kubelet: stopped the static pod kube-apiserver", file=sys.stderr)
        if self.server is None and manifest is not None and etcd_serving():
            self.server = serve_api(yaml.safe_load(manifest))
            self.manifest = manifest
            print("kubelet: started the static pod kube-apiserver", file=sys.stderr)
