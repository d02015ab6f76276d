"""DELETE and the Eviction API: finalizers, the namespace controller and the garbage collector's cascade, PodDisruptionBudgets."""

from kube_double.api_controllers import pod_healthy
from kube_double.core import now, rfc3339, status_error
from kube_double.resources import all_resources
from kube_double.selectors import field_selector, label_selector


class Deletes:
    """ApiHandler's part: deletion and eviction."""

    def delete(self, resource, key, live):
        if self.dry_run():
            return 200, self.deleted_status(resource, live)
        if live["metadata"].get("finalizers") and resource.kind != "Namespace":
            if not live["metadata"].get("deletionTimestamp"):
                live["metadata"]["deletionTimestamp"] = rfc3339(now())
                live["metadata"]["resourceVersion"] = self.store.next_version()
                self.store.save()
            return 200, self.present(resource, live)
        self.remove(resource, key)
        self.store.save()
        return 200, self.deleted_status(resource, live)

    @staticmethod
    def deleted_status(resource, live):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": live["metadata"]["name"], "group": resource.group, "kind": resource.plural, "uid": live["metadata"]["uid"]}}

    def remove(self, resource, key):
        """Delete now, with what controllers do after: the namespace controller empties a deleted namespace, a deleted CRD takes its
        objects along, and the garbage collector deletes dependents whose ownerReferences name the deleted object (background)."""
        gone = self.objects(resource).pop(key, None)
        if gone is None:
            return
        if resource.kind == "Namespace":
            for candidate in all_resources(self.store):
                if candidate.namespaced:
                    for other in [k for k in self.objects(candidate) if k.startswith(gone["metadata"]["name"] + "/")]:
                        self.remove(candidate, other)
        if resource.kind == "CustomResourceDefinition":
            self.store.data["objects"].pop(gone["metadata"]["name"], None)
        uid = gone["metadata"]["uid"]
        for candidate in all_resources(self.store):
            for other, obj in list(self.objects(candidate).items()):
                if any(reference.get("uid") == uid for reference in obj["metadata"].get("ownerReferences", [])):
                    self.remove(candidate, other)

    def delete_collection(self, resource, namespace):
        labels = label_selector(self.query.get("labelSelector"))
        fields = field_selector(self.query.get("fieldSelector"), resource)
        deleted = []
        for key, obj in list(self.objects(resource).items()):
            if (namespace is None or obj["metadata"].get("namespace") == namespace) and labels(obj["metadata"].get("labels")) and fields(obj):
                deleted.append(self.present(resource, obj, listed=True))
                if not self.dry_run():
                    self.remove(resource, key)
        self.store.save()
        return 200, {"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": {"resourceVersion": self.store.version()},
                     "items": deleted}

    def evict(self, resource, namespace, name, eviction):
        """pods/eviction (policy/v1 Eviction), as pkg/registry/core/pod/storage/eviction.go decides it."""
        key = self.object_key(resource, namespace, name)
        pod = self.objects(resource).get(key)
        if pod is None:
            return self.not_found(resource, name)
        if eviction.get("metadata", {}).get("name") not in (None, name):
            return status_error(400, "BadRequest", "name in URL does not match name in Eviction object")
        phase = pod.get("status", {}).get("phase")
        # Pods that are not running, or already being deleted, are deleted without looking at budgets.
        if not (pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed", "Pending")):
            budgets = [pdb for k, pdb in sorted(self.store.data["objects"].get("poddisruptionbudgets.policy", {}).items())
                       if k.startswith(namespace + "/") and any(p["metadata"]["name"] == name for p in self.matching_pods(pdb))]
            if len(budgets) > 1:
                return status_error(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
            if budgets:
                status = self.disruption_status(budgets[0])
                healthy = pod_healthy(pod)
                blocked = status["disruptionsAllowed"] <= 0 if healthy else status["currentHealthy"] < status["desiredHealthy"]
                if blocked:
                    return status_error(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                                        {"causes": [{"reason": "DisruptionBudget", "message": f"The disruption budget {budgets[0]['metadata']['name']} "
                                                     f"needs {status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently"}]})
        if not self.dry_run():
            self.remove(resource, key)  # no kubelet runs the pod: it is gone at once (grace periods are not modelled)
            self.store.save()
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
