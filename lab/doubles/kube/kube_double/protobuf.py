"""Protobuf bodies: kubectl's typed generators (kubectl create namespace|configmap|secret|serviceaccount) send
application/vnd.kubernetes.protobuf. The double reads the envelope (k8s.io/apimachinery runtime.Unknown behind the
"k8s\0" magic) and these kinds, with the field numbers of k8s.io/api and k8s.io/apimachinery generated.proto."""

import base64
import datetime

from kube_double.core import ApiError, rfc3339


PROTO_TIME = {1: ("seconds", "int"), 2: ("nanos", "int")}


PROTO_OWNER = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
               6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}


PROTO_META = {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"), 5: ("uid", "string"),
              6: ("resourceVersion", "string"), 7: ("generation", "int"), 8: ("creationTimestamp", PROTO_TIME),
              11: ("labels", ("map", "string")), 12: ("annotations", ("map", "string")), 13: ("ownerReferences", ("repeated", PROTO_OWNER)),
              14: ("finalizers", ("repeated", "string"))}


PROTO_KINDS = {
    "Namespace": {1: ("metadata", PROTO_META), 2: ("spec", {1: ("finalizers", ("repeated", "string"))}), 3: ("status", {1: ("phase", "string")})},
    "ConfigMap": {1: ("metadata", PROTO_META), 2: ("data", ("map", "string")), 3: ("binaryData", ("map", "bytes")), 4: ("immutable", "bool")},
    "Secret": {1: ("metadata", PROTO_META), 2: ("data", ("map", "bytes")), 3: ("type", "string"), 4: ("stringData", ("map", "string")),
               5: ("immutable", "bool")},
    "ServiceAccount": {1: ("metadata", PROTO_META), 3: ("imagePullSecrets", ("repeated", {1: ("name", "string")})),
                       4: ("automountServiceAccountToken", "bool")},
}


def proto_fields(data):
    """[(field number, wire type, value)] of one protobuf message."""
    fields, position = [], 0

    def varint():
        nonlocal position
        result, shift = 0, 0
        while True:
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result
    while position < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, wire, varint()))
        elif wire == 2:
            length = varint()
            fields.append((number, wire, data[position:position + length]))
            position += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            fields.append((number, wire, int.from_bytes(data[position:position + size], "little")))
            position += size
        else:
            raise ApiError(400, "BadRequest", f"the protobuf body has an unknown wire type {wire}")
    return fields


def proto_value(kind, value):
    if kind == "string":
        return value.decode()
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return value
    return proto_message(value, kind)


def proto_message(data, schema):
    """The message as its JSON form; empty values are left out, as Go's omitempty leaves them out of JSON."""
    result = {}
    for number, _wire_type, value in proto_fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = dict((n, v) for n, _wire_type, v in proto_fields(value))
            result.setdefault(name, {})[entry.get(1, b"").decode()] = proto_value(kind[1], entry.get(2, b""))
        elif isinstance(kind, tuple):
            result.setdefault(name, []).append(proto_value(kind[1], value))
        else:
            result[name] = proto_value(kind, value)
    if schema is PROTO_TIME:
        return rfc3339(datetime.datetime.fromtimestamp(result["seconds"], datetime.timezone.utc)) if result.get("seconds") else None
    return {key: value for key, value in result.items() if value not in ("", None, {}, 0, False) or key == "immutable"}


def decode_protobuf(raw):
    if not raw.startswith(b"k8s\x00"):
        raise ApiError(400, "BadRequest", "the protobuf body does not start with the k8s magic")
    envelope = dict((number, value) for number, _wire_type, value in proto_fields(raw[4:]))
    type_meta = dict((number, value.decode()) for number, _wire_type, value in proto_fields(envelope.get(1, b"")))
    kind = type_meta.get(2, "")
    if kind not in PROTO_KINDS:
        raise ApiError(415, "UnsupportedMediaType", f"the lab double decodes protobuf bodies of {', '.join(PROTO_KINDS)} only, not {kind}: "
                                                    f"the body of the request was in an unknown format - accepted media types include: "
                                                    f"application/json, application/yaml")
    return {"apiVersion": type_meta.get(1, "v1"), "kind": kind, **proto_message(envelope.get(2, b""), PROTO_KINDS[kind])}
