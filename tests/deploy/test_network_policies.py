"""What the NetworkPolicies let each workload reach, computed as a CNI would: a pod selected by
any policy of a direction is isolated in that direction, and may use the union of the rules of
the policies that select it. Sandboxes reach Redis and DNS, nothing else (no database, no API
server, no internet); every other flow is the table in
deploy/kubernetes/base/networkpolicies.yaml."""

import pytest

from tests.deploy.manifests import (
    NO_RENDERER,
    RENDERER,
    VARIANTS,
    pod_templates,
    render,
    trainer_spec,
)
from training.kubernetes import KubernetesSpec, job_manifest
from training.models import TrainingRun

pytestmark = pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)

NAME = "app.kubernetes.io/name"


def selects(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against a label set."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = (
            expression["key"],
            expression["operator"],
            expression.get("values") or [],
        )
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _peer(peer: dict) -> str:
    if "ipBlock" in peer:
        return (
            "cidr:"
            + peer["ipBlock"]["cidr"]
            + "".join(f" except {e}" for e in peer["ipBlock"].get("except", []))
        )
    namespace = peer.get("namespaceSelector")
    pods = peer.get("podSelector")
    words = []
    if namespace is not None:
        words.append(
            "ns:"
            + (
                (namespace.get("matchLabels") or {}).get("kubernetes.io/metadata.name")
                or str(namespace)
            )
        )
    if pods is not None:
        labels = pods.get("matchLabels") or {}
        names = [
            e["values"]
            for e in pods.get("matchExpressions") or []
            if e["key"] == NAME and e["operator"] == "In"
        ]
        words.append(
            "pod:"
            + (labels.get(NAME) or labels.get("k8s-app") or "|".join(sorted(*names)) or str(pods))
        )
    return " ".join(words)


def allowed(docs: list[dict], labels: dict, direction: str) -> set[tuple[str, str]] | None:
    """``{(peer, "port/protocol")}`` that ``labels``' pods may use in ``direction`` (``Ingress`` or
    ``Egress``); None when no policy isolates them (everything is allowed)."""
    policies = [
        d
        for d in docs
        if d["kind"] == "NetworkPolicy"
        and selects(d["spec"]["podSelector"], labels)
        and direction in d["spec"].get("policyTypes", ["Ingress"])
    ]
    if not policies:
        return None
    out = set()
    for policy in policies:
        for rule in policy["spec"].get(direction.lower()) or []:
            peers = [
                _peer(p) for p in rule.get("to" if direction == "Egress" else "from") or []
            ] or ["any"]
            ports = [
                f"{p['port']}/{p.get('protocol', 'TCP')}" for p in rule.get("ports") or []
            ] or ["all"]
            out |= {(peer, port) for peer in peers for port in ports}
    return out


def workloads(docs: list[dict]) -> dict[str, dict]:
    """Pod labels by workload name, the trainer Job the backend builds included."""
    found = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"]
        for _n, w, _p in pod_templates(docs)
    }
    job = job_manifest(
        TrainingRun(pk=3, config={}, total_steps=1),
        KubernetesSpec.from_config(trainer_spec(docs)),
        attempt=1,
    )
    found["crucible-trainer"] = job["spec"]["template"]["metadata"]["labels"]
    return found


DNS = {("ns:kube-system pod:kube-dns", "53/UDP"), ("ns:kube-system pod:kube-dns", "53/TCP")}


def servers(variant: str) -> tuple[set, set]:
    """Where PostgreSQL and Redis are: in the namespace (dev) or at the addresses prod names."""
    if variant.startswith("dev"):
        return {("pod:crucible-postgresql", "5432/TCP")}, {("pod:crucible-redis", "6379/TCP")}
    return {("cidr:10.20.0.10/32", "5432/TCP")}, {("cidr:10.20.0.20/32", "6379/TCP")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_egress_of_every_workload(variant):
    docs = render(variant)
    postgresql, redis = servers(variant)
    api = {("cidr:0.0.0.0/0", "443/TCP"), ("cidr:0.0.0.0/0", "6443/TCP")}
    expected = {
        "crucible-web": DNS | postgresql | redis,
        "crucible-worker-control": DNS | postgresql | redis | api,
        "crucible-worker-validation": DNS | postgresql | redis,
        "crucible-worker-default": DNS | postgresql | redis,
        "crucible-beat": DNS | redis,
        "crucible-sandbox-python": DNS | redis,
        "crucible-sandbox-node": DNS | redis,
        "crucible-trainer": DNS | postgresql | redis | {("cidr:0.0.0.0/0", "443/TCP")},
    }
    if variant.startswith("dev"):  # the servers themselves reach nothing but DNS
        expected |= {"crucible-postgresql": DNS, "crucible-redis": DNS}
    found = {name: allowed(docs, labels, "Egress") for name, labels in workloads(docs).items()}
    assert found == expected


@pytest.mark.parametrize("variant", VARIANTS)
def test_sandboxes_reach_redis_and_dns_only(variant):
    """Spelled out for the pods that run untrusted code: one server port, one resolver."""
    docs = render(variant)
    _postgresql, redis = servers(variant)
    for name in ("crucible-sandbox-python", "crucible-sandbox-node"):
        labels = workloads(docs)[name]
        egress = allowed(docs, labels, "Egress")
        assert egress == redis | DNS
        assert not [peer for peer, _port in egress if peer in ("any", "cidr:0.0.0.0/0")]
        assert allowed(docs, labels, "Ingress") == {("ns:monitoring", "9100/TCP")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_ingress_of_every_workload(variant):
    docs = render(variant)
    metrics = {("ns:monitoring", "9100/TCP")}
    web = (
        {("ns:ingress-nginx", "8000/TCP")} if variant.startswith("prod") else {("any", "8000/TCP")}
    )
    expected = {
        "crucible-web": web,
        "crucible-worker-control": metrics,
        "crucible-worker-validation": metrics,
        "crucible-worker-default": metrics,
        "crucible-beat": set(),
        "crucible-sandbox-python": metrics,
        "crucible-sandbox-node": metrics,
        "crucible-trainer": metrics,
    }
    if variant.startswith(
        "dev"
    ):  # the servers: from their clients only (KEDA reads the queue lengths too)
        database_clients = [
            "crucible-trainer",
            "crucible-web",
            "crucible-worker-control",
            "crucible-worker-default",
            "crucible-worker-validation",
        ]
        redis_clients = sorted(
            database_clients + ["crucible-beat", "crucible-sandbox-node", "crucible-sandbox-python"]
        )
        expected["crucible-postgresql"] = {("pod:" + "|".join(database_clients), "5432/TCP")}
        expected["crucible-redis"] = {
            ("pod:" + "|".join(redis_clients), "6379/TCP"),
            ("ns:keda", "6379/TCP"),
        }
    found = {name: allowed(docs, labels, "Ingress") for name, labels in workloads(docs).items()}
    assert found == expected


def test_the_evaluator_sees_an_open_pod():
    """Without a default deny, a pod no policy selects is open: the computation can say so."""
    docs = [
        d
        for d in render("prod")
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] != "default-deny"
    ]
    assert allowed(docs, {NAME: "crucible-beat"}, "Ingress") is None
    assert (
        allowed(docs, {NAME: "something-else"}, "Egress") == DNS
    )  # only the all-pods DNS policy selects it
