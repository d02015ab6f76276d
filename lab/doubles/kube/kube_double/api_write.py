"""POST, PUT and PATCH: creation, updates with the four patch types, and server-side apply with managedFields."""

import json
import secrets
import uuid

from kube_double.core import ApiError, SAFE_ALPHANUMS, now, rfc3339, status_error
from kube_double.fields import delete_path, field_path_text, fields_v1, get_path, leaf_paths, paths_of, set_path
from kube_double.patch import json_patch, merge_patch, strategic_merge


class Writes:
    """ApiHandler's part: the writes."""

    def field_manager(self):
        if self.query.get("fieldManager"):
            return self.query["fieldManager"]
        agent = self.headers.get("User-Agent", "unknown")
        return agent.split("/")[0][:128]  # the apiserver's default: the user agent up to the first slash

    def check_identity(self, resource, namespace, name, obj):
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request is not an object")
        metadata = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = metadata
        if obj.get("kind") and obj["kind"] != resource.kind:
            raise ApiError(400, "BadRequest", f'the API version in the data ({obj.get("apiVersion")}) does not match the expected API version '
                                              f'({resource.api_version})' if obj.get("apiVersion") != resource.api_version else
                           f'the kind in the data ({obj["kind"]}) does not match the expected kind ({resource.kind})')
        if name is not None and metadata.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", f"the name of the object ({metadata['name']}) does not match the name on the URL ({name})")
        if resource.namespaced:
            if metadata.get("namespace") not in (None, namespace):
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)

    def create(self, resource, namespace, obj, user, apply_manager=None):
        if resource.namespaced and namespace is None:
            return status_error(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        self.check_identity(resource, namespace, None, obj)
        metadata = obj["metadata"]
        if not metadata.get("name"):
            if metadata.get("generateName"):
                # names.SimpleNameGenerator: five characters of utilrand's alphabet (no vowels, no 0, 1, 3).
                metadata["name"] = metadata["generateName"] + "".join(secrets.choice(SAFE_ALPHANUMS) for _position in range(5))
            else:
                return status_error(422, "Invalid", f'{resource.kind} "" is invalid: metadata.name: Required value: name or generateName is required',
                                    {"kind": resource.kind, "causes": [{"reason": "FieldValueRequired", "field": "metadata.name",
                                                                        "message": "Required value: name or generateName is required"}]})
        name = metadata["name"]
        refused = self.node_restriction(user, "POST", obj, name) if resource.kind == "Pod" else None
        if refused:
            return refused
        if resource.kind == "Node" and not self.is_admin() and user != f"system:node:{name}":
            return status_error(403, "Forbidden", f'nodes "{name}" is forbidden: node "{user[12:]}" is not allowed to modify node "{name}"')
        if resource.namespaced and namespace not in self.store.data["objects"]["namespaces"]:
            return status_error(404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})
        if resource.namespaced and self.store.data["objects"]["namespaces"][namespace]["metadata"].get("deletionTimestamp"):
            return status_error(403, "Forbidden", f'{resource.plural} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                                                  f'because it is being terminated')
        key = self.object_key(resource, namespace, name)
        if key in self.objects(resource):
            group = f".{resource.group}" if resource.group else ""
            return status_error(409, "AlreadyExists", f'{resource.plural}{group} "{name}" already exists',
                                {"name": name, "group": resource.group, "kind": resource.plural})
        obj = json.loads(json.dumps(obj))
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        metadata = obj["metadata"]
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation", "managedFields", "selfLink"):
            metadata.pop(field, None)
        metadata.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(now()))
        if resource.generation:
            metadata["generation"] = 1
        # An applier owns what it applied, not what the registry defaults (a Namespace's kubernetes.io/metadata.name label and
        # spec.finalizers): upstream's field manager computes an Apply entry from the applied configuration alone, so a
        # second apply of the same configuration leaves those fields in place.
        applied_fields = set(leaf_paths({k: v for k, v in obj.items() if k != "status"}))
        self.prepare_create(resource, obj)
        manager = apply_manager or self.field_manager()
        fields = applied_fields if apply_manager else set(leaf_paths({k: v for k, v in obj.items() if k != "status"}))
        metadata["managedFields"] = [self.managed_entry(manager, "Apply" if apply_manager else "Update", resource, fields)]
        if self.dry_run():
            obj["metadata"]["resourceVersion"] = self.store.version()
            return 201, self.present(resource, obj)
        metadata["resourceVersion"] = self.store.next_version()
        self.objects(resource)[key] = obj
        self.store.save()
        return 201, self.present(resource, obj)

    @staticmethod
    def managed_entry(manager, operation, resource, fields, sub=None):
        entry = {"manager": manager, "operation": operation, "apiVersion": resource.api_version, "time": rfc3339(now()),
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(fields)}
        if sub:
            entry["subresource"] = sub
        return entry

    def prepare_create(self, resource, obj):
        """What each kind's registry strategy sets on create."""
        if resource.kind == "Pod":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif resource.kind == "Namespace":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        elif resource.kind == "CustomResourceDefinition":
            names = obj.get("spec", {}).get("names", {})
            if not obj.get("spec", {}).get("group") or not names.get("plural") or not names.get("kind") or \
                    obj["metadata"]["name"] != f"{names['plural']}.{obj['spec']['group']}":
                raise ApiError(422, "Invalid", f'CustomResourceDefinition.apiextensions.k8s.io "{obj["metadata"]["name"]}" is invalid: metadata.name: '
                                               f'Invalid value: "{obj["metadata"]["name"]}": must be spec.names.plural+"."+spec.group')
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
            stamp = rfc3339(now())
            obj["status"] = {"acceptedNames": dict(names), "storedVersions": [v["name"] for v in obj["spec"].get("versions", []) if v.get("storage")],
                             "conditions": [{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                                             "lastTransitionTime": stamp},
                                            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                                             "message": "the initial names have been accepted", "lastTransitionTime": stamp}]}
        elif resource.kind == "Secret":
            obj.setdefault("type", "Opaque")  # SetDefaults_Secret
        elif resource.kind == "Service":
            obj.setdefault("spec", {}).setdefault("type", "ClusterIP")
            obj["status"] = {"loadBalancer": {}}
        elif resource.kind == "APIService":
            # kube-aggregator apiservice strategy PrepareForCreate: the status is cleared and a local APIService (no spec.service)
            # is Available at once; one backed by a Service gets no condition (the availability controller does not run).
            obj["status"] = {}
            if not (obj.get("spec") or {}).get("service"):
                obj["status"]["conditions"] = [{"type": "Available", "status": "True", "lastTransitionTime": rfc3339(now()), "reason": "Local",
                                                "message": "Local APIServices are always available"}]
        elif resource.status and resource.kind not in ("Node", "CertificateSigningRequest"):
            obj.pop("status", None)

    def changed(self, resource, old, new, manager, operation, sub=None):
        """Bump resourceVersion (and generation when the spec changed); record the manager's fields."""
        if sub is None and resource.status:
            new["status"] = json.loads(json.dumps(old.get("status"))) if "status" in old else new.pop("status", None)
            if new.get("status") is None:
                new.pop("status", None)
        if sub == "status":
            new = dict(json.loads(json.dumps(old)), status=new.get("status"))
            if new["status"] is None:
                new.pop("status")
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "name", "namespace"):
            if field in old["metadata"]:
                new["metadata"][field] = old["metadata"][field]
            else:
                new["metadata"].pop(field, None)
        new["apiVersion"], new["kind"] = old.get("apiVersion", resource.api_version), resource.kind
        new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
        new["metadata"]["managedFields"] = old["metadata"].get("managedFields", [])
        if new == old:
            return old, False
        if resource.generation and sub is None and any(new.get(k) != old.get(k) for k in new.keys() | old.keys() if k not in ("metadata", "status")):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if operation == "Update":
            touched = {p for p in set(leaf_paths(new)) | set(leaf_paths(old)) if get_path(new, p) != get_path(old, p)}
            touched = {p for p in touched if (p[0] == "status") == (sub == "status")}
            self.record(new, resource, manager, "Update", touched, sub, replace=False)
        new["metadata"]["resourceVersion"] = self.store.next_version()
        return new, True

    def record(self, obj, resource, manager, operation, fields, sub=None, replace=True, taken=None):
        """Set the manager's fields; other managers lose the fields it took (changed values), and keep shared ones."""
        taken = fields if taken is None else taken
        entries, mine = [], None
        for entry in obj["metadata"].get("managedFields", []):
            if entry["manager"] == manager and entry["operation"] == operation and entry.get("subresource") == sub:
                mine = entry
                continue
            remaining = paths_of(entry.get("fieldsV1")) - taken
            if remaining:
                entries.append(dict(entry, fieldsV1=fields_v1(remaining)))
        owned = fields if replace or mine is None else paths_of(mine.get("fieldsV1")) | fields
        existing = {p for p in owned if get_path(obj, p) is not KeyError}
        if existing:
            entries.append(self.managed_entry(manager, operation, resource, existing, sub))
        obj["metadata"]["managedFields"] = entries

    def update(self, method, resource, namespace, name, sub, live, user):
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        apply_ = method == "PATCH" and content_type == "application/apply-patch+yaml"
        if apply_ and not self.query.get("fieldManager"):
            return status_error(400, "BadRequest", "fieldManager is required for apply requests")
        body = self.body()
        if live is None:
            if apply_:
                self.check_identity(resource, namespace, name, body)
                return self.create(resource, namespace, body, user, apply_manager=self.query["fieldManager"])
            return self.not_found(resource, name)
        if apply_:
            return self.apply(resource, namespace, name, sub, live, body)
        if method == "PUT":
            self.check_identity(resource, namespace, name, body)
            wanted = body["metadata"].get("resourceVersion")
            if wanted and wanted != live["metadata"].get("resourceVersion"):
                group = f".{resource.group}" if resource.group else ""
                return status_error(409, "Conflict", f'Operation cannot be fulfilled on {resource.plural}{group} "{name}": the object has been modified; '
                                                     f'please apply your changes to the latest version and try again',
                                    {"name": name, "group": resource.group, "kind": resource.plural})
            new = json.loads(json.dumps(body))
        elif content_type == "application/merge-patch+json":
            new = merge_patch(live, body)
        elif content_type == "application/strategic-merge-patch+json":
            if resource.crd:
                return status_error(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - accepted media types include: '
                                                                 'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml')
            new = strategic_merge(live, body)
        elif content_type == "application/json-patch+json":
            new = json_patch(live, body)
        else:
            return status_error(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - accepted media types include: '
                                                             'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml')
        if method == "PATCH" and not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        new, changed = self.changed(resource, live, json.loads(json.dumps(new)), self.field_manager(), "Update", sub)
        return self.commit(resource, namespace, name, new, changed, sub)

    def commit(self, resource, namespace, name, new, changed, sub):
        if changed and not self.dry_run():
            key = self.object_key(resource, namespace, name)
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                self.remove(resource, key)  # the last finalizer is gone: the object goes
            else:
                self.objects(resource)[key] = new
            # kubelets post their Node's status every few seconds: those writes stay in memory (the next save keeps them).
            if not (resource.kind == "Node" and sub == "status"):
                self.store.save()
        return 200, self.present(resource, new)

    def apply(self, resource, namespace, name, sub, live, applied):
        """Server-side apply (KEP-555) of `applied` by the fieldManager: conflicts with other managers' fields of a different value
        answer 409 unless force=true; fields this manager applied before and no longer applies are removed when no other manager
        owns them; lists are atomic (the double keeps no per-element ownership)."""
        self.check_identity(resource, namespace, name, applied)
        manager, force = self.query["fieldManager"], self.query.get("force") in ("true", "1")
        applied_paths = {p for p in leaf_paths(applied) if (p[0] == "status") == (sub == "status")}
        if resource.status and sub is None:
            applied.pop("status", None)
        previous, others = set(), {}
        for entry in live["metadata"].get("managedFields", []):
            if entry["manager"] == manager and entry["operation"] == "Apply" and entry.get("subresource") == sub:
                previous = paths_of(entry.get("fieldsV1"))
            else:
                for owned in paths_of(entry.get("fieldsV1")):
                    others.setdefault(owned, set()).add(entry["manager"])
        conflicts = sorted((p, manager_) for p in applied_paths if p in others and get_path(live, p) != get_path(applied, p)
                           for manager_ in others[p])
        if conflicts and not force:
            if len(conflicts) == 1:
                message = f'Apply failed with 1 conflict: conflict with "{conflicts[0][1]}": {field_path_text(conflicts[0][0])}'
            else:
                message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(
                    f'conflict with "{m}": {field_path_text(p)}' for p, m in conflicts)
            return status_error(409, "Conflict", message, {"causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"',
                                                                       "field": field_path_text(p)} for p, m in conflicts]})
        new = json.loads(json.dumps(live))
        for gone in previous - applied_paths:
            if gone not in others:
                delete_path(new, gone)
        for parts in applied_paths:
            set_path(new, parts, get_path(applied, parts))
        new, changed = self.changed(resource, live, new, manager, "Apply", sub)
        if changed or previous != applied_paths:
            if not changed:
                new = json.loads(json.dumps(live))
            self.record(new, resource, manager, "Apply", applied_paths, sub, taken={p for p, _manager in conflicts})
            if not changed:
                new["metadata"]["resourceVersion"] = self.store.next_version()
            changed = True
        return self.commit(resource, namespace, name, new, changed, sub)
