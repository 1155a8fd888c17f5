"""The control workers' Role grants exactly what training/kubernetes.py calls, and only the
control workers hold a token for it. The expected rules are read from the backend's source,
so a new client call (a log reader, a watch) fails here until the Role grants it."""

import ast
import re
from pathlib import Path

import pytest

import training.kubernetes
from tests.deploy.manifests import (
    NO_RENDERER,
    RENDERER,
    VARIANTS,
    find,
    pod_templates,
    render,
)

pytestmark = pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)

# The official client's method names: <action>_namespaced_<resource>, action -> RBAC verb.
VERBS = {
    "create": "create",
    "read": "get",
    "list": "list",
    "delete": "delete",
    "patch": "patch",
    "replace": "update",
    "watch": "watch",
}
RESOURCES = {"job": ("batch", "jobs"), "pod": ("", "pods"), "pod_log": ("", "pods/log")}
CALL = re.compile(r"^(create|read|list|delete|patch|replace|watch)_namespaced_(job|pod_log|pod)$")


def backend_permissions() -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs, from every ``*_namespaced_*`` call in
    training/kubernetes.py."""
    tree = ast.parse(Path(training.kubernetes.__file__).read_text())
    wanted: dict[tuple[str, str], set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            match = CALL.match(node.func.attr)
            if match:
                wanted.setdefault(RESOURCES[match.group(2)], set()).add(VERBS[match.group(1)])
    return wanted


def test_the_backend_calls_are_found():
    """The reading above sees the backend's calls (it would pass vacuously on an empty set)."""
    assert backend_permissions() == {
        ("batch", "jobs"): {"create", "get", "list", "delete"},
        ("", "pods"): {"list", "delete"},
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_role_grants_exactly_the_backend_calls(variant):
    docs = render(variant)
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert (
            not rule.get("resourceNames")
            and "*" not in rule["verbs"]
            and "*" not in rule["resources"]
        )
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == backend_permissions()
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "crucible-control")
    ]


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_the_control_workers_hold_a_token(variant):
    docs = render(variant)
    holders = []
    for name, _workload, pod in pod_templates(docs):
        account = pod.get("serviceAccountName", "default")
        mounts = pod.get("automountServiceAccountToken")
        if mounts is None and account != "default":
            mounts = find(docs, "ServiceAccount", account).get("automountServiceAccountToken", True)
        if mounts is not False:
            holders.append((name, account))
    assert holders == [("Deployment/crucible-worker-control", "crucible-control")]
