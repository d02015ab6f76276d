"""Label and field selectors (k8s.io/apimachinery pkg/labels and pkg/fields)."""

import re

from kube_double.core import ApiError


# Fields each kind may be selected by besides metadata.name and metadata.namespace (the field label conversion functions).
FIELD_LABELS = {"Pod": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "status.phase",
                        "status.podIP", "status.nominatedNodeName"},
                "Node": {"spec.unschedulable"}, "Secret": {"type"}, "Namespace": {"status.phase"}}


def split_selector(text):
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def label_selector(text):
    """A predicate for a label selector string: k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k."""
    requirements = []
    for part in split_selector(text or ""):
        match = re.fullmatch(r"([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)", part)
        if match:
            values = {value.strip() for value in match.group(3).split(",") if value.strip()}
            requirements.append((match.group(1), match.group(2), values))
            continue
        match = re.fullmatch(r"([^\s!=(),]+)\s*(==|!=|=)\s*([^\s!=(),]*)", part)
        if match:
            requirements.append((match.group(1), "!=" if match.group(2) == "!=" else "=", {match.group(3)}))
            continue
        match = re.fullmatch(r"(!?)\s*([^\s!=(),]+)", part)
        if match:
            requirements.append((match.group(2), "!" if match.group(1) else "exists", set()))
            continue
        raise ApiError(400, "BadRequest", f'unable to parse requirement: found \'{part}\', expected: identifier')

    def matches(labels):
        labels = labels or {}
        for key, operator, values in requirements:
            present, value = key in labels, labels.get(key)
            if (operator == "=" and value not in values) or (operator == "in" and not (present and value in values)) \
                    or (operator == "!=" and present and value in values) or (operator == "notin" and present and value in values) \
                    or (operator == "exists" and not present) or (operator == "!" and present):
                return False
        return True
    return matches


def field_value(obj, field):
    node = obj
    for part in field.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def field_selector(text, resource):
    requirements = []
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get(resource.kind, set())
    for part in split_selector(text or ""):
        match = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", part)
        if not match:
            raise ApiError(400, "BadRequest", f'invalid selector: \'{text}\'; can\'t understand \'{part}\'')
        if match.group(1) not in allowed:
            raise ApiError(400, "BadRequest", f'field label not supported: {match.group(1)}')
        requirements.append((match.group(1), match.group(2) == "!=", match.group(3)))
    return lambda obj: all((field_value(obj, field) != value) if negated else (field_value(obj, field) == value)
                           for field, negated, value in requirements)
