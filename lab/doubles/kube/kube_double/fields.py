"""Managed fields (server-side apply): a field set is a set of paths to the leaves the manager set; lists are atomic."""

import json


IDENTITY = {"name", "namespace", "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "deletionTimestamp",
            "selfLink", "generateName"}


def leaf_paths(obj, prefix=()):
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and key in IDENTITY:
                continue
            yield from leaf_paths(value, prefix + (key,))
    elif prefix:
        yield prefix


def get_path(obj, parts):
    for part in parts:
        if not isinstance(obj, dict) or part not in obj:
            return KeyError
        obj = obj[part]
    return obj


def set_path(obj, parts, value):
    for part in parts[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
        obj = obj[part]
    obj[parts[-1]] = json.loads(json.dumps(value))


def delete_path(obj, parts):
    holders = []
    for part in parts[:-1]:
        if not isinstance(obj, dict) or part not in obj:
            return
        holders.append((obj, part))
        obj = obj[part]
    if isinstance(obj, dict):
        obj.pop(parts[-1], None)
    for holder, part in reversed(holders):  # maps left empty by the removal go too
        if holder[part] == {}:
            del holder[part]


def fields_v1(paths):
    tree = {}
    for parts in sorted(paths):
        node = tree
        for part in parts:
            node = node.setdefault(f"f:{part}", {})
    return tree


def paths_of(fields, prefix=()):
    found = set()
    for key, value in (fields or {}).items():
        if key.startswith("f:"):
            inner = paths_of(value, prefix + (key[2:],))
            found |= inner or {prefix + (key[2:],)}
        elif key != ".":
            found.add(prefix)  # k:/v:/i: list elements: the double keeps lists atomic
    return found


def field_path_text(parts):
    return "." + ".".join(parts)
