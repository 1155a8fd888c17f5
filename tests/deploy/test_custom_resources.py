"""KEDA's ScaledObject and TriggerAuthentication and the Prometheus Operator's PodMonitor are
custom resources: kubernetes-validate has no schema for them, so their structure is checked
here against what they point at (the Deployments, the queue names of sandboxes/queue.py, the
Secrets the guide lists, the pods' named ports)."""

import pytest

from sandboxes.queue import pending_key
from sandboxes.runtimes import EXECUTORS, RootPythonExecutor
from tests.deploy.manifests import NO_RENDERER, RENDERER, find, render
from tests.deploy.test_network_policies import selects

pytestmark = pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)

WITH_COMPONENTS = ("dev+keda+prometheus-operator", "prod+keda+prometheus-operator")
# The base deploys a pool per runtime of the host's image; a runtime with a root of its own
# (python3.13's Debian root) is an image of its own, deployed per environment by
# `manage.py environment_image` (deploy/README.md, "Environments with packages").
BASE_RUNTIMES = [r for r, e in EXECUTORS.items() if not issubclass(e, RootPythonExecutor)]


@pytest.mark.parametrize("variant", WITH_COMPONENTS)
def test_scaled_objects_scale_each_pool_on_its_queue(variant):
    docs = render(variant)
    scaled = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ScaledObject"}
    assert set(scaled) == {f"crucible-sandbox-{runtime}" for runtime in BASE_RUNTIMES}
    auth = {d["metadata"]["name"]: d for d in docs if d["kind"] == "TriggerAuthentication"}
    for runtime in BASE_RUNTIMES:
        obj = scaled[f"crucible-sandbox-{runtime}"]
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        spec = obj["spec"]
        target = find(docs, "Deployment", spec["scaleTargetRef"]["name"])
        assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
        assert target["spec"]["template"]["spec"]["containers"][0]["command"][-3] == runtime
        assert 1 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
        (redis,) = [t for t in spec["triggers"] if t["type"] == "redis"]
        assert redis["metadata"]["listName"] == pending_key(
            runtime
        )  # the very list the workers consume
        assert (
            int(redis["metadata"]["listLength"]) > 0
            and int(redis["metadata"]["activationListLength"]) >= 0
        )
        assert redis["authenticationRef"]["name"] in auth
        assert {t["type"] for t in spec["triggers"]} == {"redis", "cpu"}
        # KEDA owns the pool's HPA now: the base's would fight it
        assert not [
            d
            for d in docs
            if d["kind"] == "HorizontalPodAutoscaler"
            and d["spec"]["scaleTargetRef"]["name"] == target["metadata"]["name"]
        ]
    for trigger_auth in auth.values():
        refs = trigger_auth["spec"]["secretTargetRef"]
        assert {r["parameter"] for r in refs} == {"address", "password"}
        for ref in refs:
            if variant.startswith("dev"):
                secret = next(
                    d
                    for d in docs
                    if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]
                )
                assert ref["key"] in secret["data"]
            else:
                assert ref["name"] == "crucible-keda-redis"


@pytest.mark.parametrize("variant", ("dev", "prod"))
def test_without_keda_the_cpu_autoscalers_stay(variant):
    docs = render(variant)
    assert not [d for d in docs if d["apiVersion"].startswith("keda.sh/")]
    hpas = {
        d["spec"]["scaleTargetRef"]["name"]: d
        for d in docs
        if d["kind"] == "HorizontalPodAutoscaler"
    }
    assert set(hpas) == {f"crucible-sandbox-{runtime}" for runtime in BASE_RUNTIMES}
    for hpa in hpas.values():
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


@pytest.mark.parametrize("variant", WITH_COMPONENTS)
def test_pod_monitors_select_pods_with_the_named_port(variant):
    docs = render(variant)
    monitors = [d for d in docs if d["kind"] == "PodMonitor"]
    assert monitors and all(m["apiVersion"] == "monitoring.coreos.com/v1" for m in monitors)
    covered = set()
    for monitor in monitors:
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        matched = [
            d
            for d in docs
            if d["kind"] == "Deployment"
            and selects(monitor["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])
        ]
        assert matched, monitor["metadata"]["name"]
        for deployment in matched:
            ports = {
                p["name"]
                for c in deployment["spec"]["template"]["spec"]["containers"]
                for p in c.get("ports", [])
            }
            assert endpoint["port"] in ports, deployment["metadata"]["name"]
            covered.add(deployment["metadata"]["name"])
        if "authorization" in endpoint:
            assert endpoint["authorization"]["credentials"] == {
                "name": "crucible-env",
                "key": "CRUCIBLE_METRICS_TOKEN",
            }
    scraped = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "Deployment"
        and d["spec"]["template"]["metadata"].get("annotations", {}).get("prometheus.io/scrape")
        == "true"
    }
    assert covered == scraped  # the same pods either way of scraping
