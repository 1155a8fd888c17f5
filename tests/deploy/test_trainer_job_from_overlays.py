"""The trainer Job has one source of truth: training/kubernetes.py builds it, from the spec the
overlays put in the ConfigMap crucible-trainer-spec and hand to the web and control pods as
CRUCIBLE_KUBERNETES_DEFAULTS. Here that spec goes through the same environment variable into
the backend, and the Job it renders validates strictly, meets the restricted profile and
carries the overlay's image, GPUs, node selector and tolerations."""

import json

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions

from tests.deploy import pod_security
from tests.deploy.manifests import (
    NO_RENDERER,
    RENDERER,
    find,
    namespace_of,
    render,
    trainer_spec,
)
from training.config import ConfigError
from training.kubernetes import (
    DEFAULTS_ENV,
    TARGET_KUBERNETES_VERSION,
    KubernetesSpec,
    job_manifest,
    spec_defaults,
)
from training.models import TrainingRun

VERSIONS = sorted({TARGET_KUBERNETES_VERSION, all_versions()[-1]})


def _job(run_config: dict, spec_overrides: dict) -> dict:
    spec = KubernetesSpec.from_config(spec_overrides)
    return job_manifest(TrainingRun(pk=11, config=run_config, total_steps=1), spec, attempt=2)


@pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)
@pytest.mark.parametrize("overlay", ("dev", "prod"))
def test_the_backend_renders_a_valid_restricted_job_from_the_overlay(overlay, monkeypatch):
    docs = render(overlay)
    # a generated ConfigMap: its name carries a content hash, which kustomize writes into the
    # references
    (config_map,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("crucible-trainer-spec-")
    ]
    # The pods that launch runs or check launch forms get the spec from that ConfigMap key.
    for deployment in ("crucible-web", "crucible-worker-control"):
        env = find(docs, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
        (entry,) = [e for e in env if e["name"] == DEFAULTS_ENV]
        assert entry["valueFrom"]["configMapKeyRef"] == {
            "name": config_map["metadata"]["name"],
            "key": "spec.json",
        }
    monkeypatch.setenv(DEFAULTS_ENV, config_map["data"]["spec.json"])
    expected = trainer_spec(docs)
    for run_config, overrides in (({}, {}), ({"nproc_per_node": 2}, {"cpu": "3"})):
        job = _job(run_config, overrides)  # a run that names nothing but what it changes
        for version in VERSIONS:
            kubernetes_validate.validate(job, version, strict=True)
        pod = job["spec"]["template"]["spec"]
        assert pod_security.violations(pod, "restricted") == []
        assert pod["automountServiceAccountToken"] is False
        (container,) = pod["containers"]
        assert container["image"] == expected["image"]
        assert job["metadata"]["namespace"] == namespace_of(docs) == expected["namespace"]
        assert container["envFrom"] == [
            {"configMapRef": {"name": expected["env_config_map"]}},
            {"secretRef": {"name": expected["env_secret"]}},
        ]
        assert container["resources"]["limits"]["cpu"] == overrides.get("cpu", expected["cpu"])
        assert pod["securityContext"]["fsGroup"] == expected["fs_group"]
        if expected["gpus"]:
            assert container["resources"]["limits"]["nvidia.com/gpu"] == str(expected["gpus"])
            assert container["resources"]["requests"]["nvidia.com/gpu"] == str(expected["gpus"])
        else:
            assert "nvidia.com/gpu" not in container["resources"]["limits"]
        assert pod.get("nodeSelector", {}) == expected.get("node_selector", {})
        assert pod.get("tolerations", []) == expected.get("tolerations", [])
    if overlay == "prod":
        assert expected["gpus"] >= 1 and expected["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_a_run_overrides_the_defaults_key_by_key(monkeypatch):
    monkeypatch.setenv(
        DEFAULTS_ENV, json.dumps({"image": "reg/trainer:7", "gpus": 2, "namespace": "ml"})
    )
    spec = KubernetesSpec.from_config({"gpus": 1})
    assert (spec.image, spec.gpus, spec.namespace) == ("reg/trainer:7", 1, "ml")
    assert KubernetesSpec.from_config({"image": "reg/other:1"}).image == "reg/other:1"


def test_without_defaults_the_image_is_still_required(monkeypatch):
    monkeypatch.delenv(DEFAULTS_ENV, raising=False)
    assert spec_defaults() == {}
    with pytest.raises(ConfigError, match=r"kubernetes\.image"):
        KubernetesSpec.from_config({})


@pytest.mark.parametrize(
    "raw, words",
    [
        ("{not json", f"{DEFAULTS_ENV} is not JSON"),
        ('["image"]', f"{DEFAULTS_ENV} must be a JSON object"),
        (
            '{"image": "reg/t:1", "gpus": -1}',
            f"kubernetes.gpus' must be at least 0.*comes from {DEFAULTS_ENV}",
        ),
        ('{"image": "reg/t:1", "colour": "red"}', f"kubernetes.colour.*comes from {DEFAULTS_ENV}"),
        ('{"image": "reg/t:1", "fs_group": 0}', "kubernetes.fs_group' must be at least 1"),
    ],
)
def test_bad_defaults_are_refused_naming_the_variable(raw, words, monkeypatch):
    monkeypatch.setenv(DEFAULTS_ENV, raw)
    with pytest.raises(ConfigError, match=words):
        KubernetesSpec.from_config({})


def test_a_bad_key_of_the_run_is_not_blamed_on_the_defaults(monkeypatch):
    monkeypatch.setenv(DEFAULTS_ENV, json.dumps({"image": "reg/trainer:7"}))
    with pytest.raises(ConfigError, match=r"kubernetes\.gpus") as caught:
        KubernetesSpec.from_config({"gpus": -1})
    assert DEFAULTS_ENV not in str(caught.value)
