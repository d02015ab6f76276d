"""RBAC (the API server's RBAC authorizer) for the identities kubeadm's fixed rules do not cover: a request is allowed when a
ClusterRoleBinding, or a RoleBinding of the request's namespace, binds the user (kind User) or one of its groups (kind Group) to a
ClusterRole or Role with a rule that matches the request's API group, resource (``nodes``, ``nodes/status``), verb and, for a
named object, its resourceNames. Written from the Kubernetes documentation, "Using RBAC Authorization"
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/), and ``plugin/pkg/auth/authorizer/rbac`` (``RuleAllows``).
Not modelled: aggregated ClusterRoles, nonResourceURLs, ServiceAccount subjects (the double has no ServiceAccount tokens), and the
built-in ``system:*`` roles that are not stored (kubeadm's own rules are in api_access)."""

GROUP = "rbac.authorization.k8s.io"


def request_verb(method, name, query):
    """The RBAC verb of a request, as the API server's request info resolver names it."""
    if method == "GET":
        if name is None:
            return "watch" if query.get("watch") in ("true", "1") else "list"
        return "get"
    if method == "DELETE" and name is None:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


def _matches(values, wanted):
    return "*" in values or wanted in values


def rule_allows(rule, group, resource, verb, name):
    """plugin/pkg/auth/authorizer/rbac RuleAllows for a resource request."""
    names = rule.get("resourceNames") or []
    return (_matches(rule.get("apiGroups") or [], group) and _matches(rule.get("resources") or [], resource)
            and _matches(rule.get("verbs") or [], verb) and (not names or (name is not None and name in names)))


def _binds(binding, user, groups):
    for subject in binding.get("subjects") or []:
        if subject.get("kind") == "User" and subject.get("name") == user:
            return True
        if subject.get("kind") == "Group" and subject.get("name") in groups:
            return True
    return False


def rbac_allows(objects, user, groups, request):
    """Whether a binding in ``objects`` (the store's objects by resource key) allows ``request``:
    ``{"group", "resource" (plural, "/sub" for a subresource), "verb", "namespace", "name"}``."""
    bindings = [(binding, None) for binding in objects.get(f"clusterrolebindings.{GROUP}", {}).values()]
    if request["namespace"]:
        bindings += [(binding, request["namespace"]) for key, binding in objects.get(f"rolebindings.{GROUP}", {}).items()
                     if key.split("/", 1)[0] == request["namespace"]]
    for binding, namespace in bindings:
        if not _binds(binding, user, groups):
            continue
        reference = binding.get("roleRef") or {}
        if reference.get("kind") == "ClusterRole":
            role = objects.get(f"clusterroles.{GROUP}", {}).get(reference.get("name"))
        elif namespace is not None and reference.get("kind") == "Role":
            role = objects.get(f"roles.{GROUP}", {}).get(f"{namespace}/{reference.get('name')}")
        else:
            role = None
        if role and any(rule_allows(rule, request["group"], request["resource"], request["verb"], request["name"])
                        for rule in role.get("rules") or []):
            return True
    return False
