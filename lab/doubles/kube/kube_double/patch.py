"""The documents of the patch types: JSON merge patch (RFC 7386), strategic merge patch and JSON patch (RFC 6902)."""

import json

from kube_double.core import ApiError


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Lists that strategic merge patch merges by a key instead of replacing (patchMergeKey in k8s.io/api types.go), by field name;
# ports merge by containerPort inside a container and by port in a Service. Other lists (taints, tolerations) are atomic.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name", "volumes": "name",
              "volumeMounts": "mountPath", "imagePullSecrets": "name", "conditions": "type", "addresses": "type",
              "ownerReferences": "uid", "hostAliases": "ip", "volumeDevices": "devicePath"}


MERGE_PRIMITIVES = {"finalizers", "podCIDRs"}


def strategic_merge(target, patch, parents=()):
    """Strategic merge patch (k8s.io/apimachinery strategicpatch) for the fields the double models: maps merge, lists listed in
    MERGE_KEYS merge by key ($patch: delete removes an element), $patch: replace, $retainKeys and $deleteFromPrimitiveList/
    are honoured, $setElementOrder/ is accepted and ignored (the merged order is the live order, then new elements)."""
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
            continue
        if value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
            result.pop(key, None)
        elif isinstance(value, list) and (key in MERGE_KEYS or key in MERGE_PRIMITIVES):
            result[key] = merge_list(result.get(key) or [], value, key, parents)
        elif isinstance(value, dict):
            result[key] = strategic_merge(result.get(key), value, parents + (key,))
        else:
            result[key] = value
    if "$retainKeys" in patch:
        result = {k: v for k, v in result.items() if k in patch["$retainKeys"]}
    return result


def merge_list(live, patch, field, parents):
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [item for item in patch if not (isinstance(item, dict) and item.get("$patch") == "replace")]
    if field in MERGE_PRIMITIVES:
        return live + [item for item in patch if item not in live]
    key = MERGE_KEYS[field]
    if field == "ports":
        key = "containerPort" if "containers" in parents or "initContainers" in parents else "port"
    result = [dict(item) if isinstance(item, dict) else item for item in live]
    for item in patch:
        if not isinstance(item, dict):
            result.append(item)
            continue
        index = next((i for i, old in enumerate(result) if isinstance(old, dict) and old.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            result[index] = strategic_merge(result[index], item, parents + (field,))
    return result


MERGE_KEYS["ports"] = "port"


def json_pointer(text):
    if text == "":
        return []
    if not text.startswith("/"):
        raise ApiError(422, "Invalid", f'json patch path "{text}" does not start with /')
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def json_patch(document, operations):
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    document = json.loads(json.dumps(document))

    def parent(parts):
        node = document
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def get(parts):
        node = document
        for part in parts:
            node = node[int(part)] if isinstance(node, list) else node[part]
        return node

    def remove(parts):
        holder = parent(parts)
        return holder.pop(int(parts[-1])) if isinstance(holder, list) else holder.pop(parts[-1])

    def add(parts, value):
        nonlocal document
        if not parts:
            document = value
            return
        holder = parent(parts)
        if isinstance(holder, list):
            holder.insert(len(holder) if parts[-1] == "-" else int(parts[-1]), value)
        else:
            holder[parts[-1]] = value

    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json patch must be a list of operations")
    for operation in operations:
        op, parts = operation.get("op"), json_pointer(operation.get("path", ""))
        try:
            if op == "add":
                add(parts, operation["value"])
            elif op == "remove":
                remove(parts)
            elif op == "replace":
                remove(parts)
                add(parts, operation["value"])
            elif op in ("move", "copy"):
                source = json_pointer(operation["from"])
                value = remove(source) if op == "move" else json.loads(json.dumps(get(source)))
                add(parts, value)
            elif op == "test":
                if get(parts) != operation.get("value"):
                    raise ApiError(422, "Invalid", f"testing value {operation['path']} failed: test failed")
            else:
                raise ApiError(400, "BadRequest", f'Unexpected kind: {op}')
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: "
                                           f"{op} operation does not apply: doc is missing path: \"{operation.get('path')}\"") from None
    return document
