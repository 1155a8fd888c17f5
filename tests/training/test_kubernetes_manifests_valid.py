"""Every Job manifest of the kubernetes backend validates against the official Kubernetes
schemas."""

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions

from training.kubernetes import TARGET_KUBERNETES_VERSION, KubernetesSpec, job_manifest
from training.models import TrainingRun

SPECS = {
    "minimal": {"image": "registry.example.com/crucible:1.0"},
    "gpus, tolerations, node selector": {
        "image": "registry.example.com/crucible:1.0",
        "namespace": "rl-team",
        "cpu": "8",
        "memory": "64Gi",
        "gpus": 4,
        "node_selector": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "kubernetes.io/arch": "amd64",
        },
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "team", "operator": "Equal", "value": "rl", "effect": "PreferNoSchedule"},
        ],
    },
    "secret, service account, deadline, volume": {
        "image": "crucible@sha256:" + "a" * 64,
        "cpu": "500m",
        "memory": "512Mi",
        "env_secret": "crucible-env",
        "service_account": "crucible-trainer",
        "active_deadline_seconds": 86400,
        "backoff_limit": 1,
        "ttl_seconds_after_finished": 0,
        "volume_claim": "crucible-var",
    },
    "numeric quantities": {"image": "crucible:dev", "cpu": 2, "memory": "1G"},
}


def _run(run_id: int = 42, **config) -> TrainingRun:
    """An unsaved run: the manifest needs its id and config only."""
    return TrainingRun(pk=run_id, config=config, total_steps=1)


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("version", [TARGET_KUBERNETES_VERSION, all_versions()[-1]])
def test_manifest_validates_strictly(name, version):
    spec = KubernetesSpec.from_config(SPECS[name])
    for attempt in (1, 3):
        manifest = job_manifest(_run(), spec, attempt=attempt)
        # strict: fields the schema does not know are errors too
        kubernetes_validate.validate(manifest, version, strict=True)
        assert manifest["metadata"]["name"] == f"crucible-run-42-{attempt}"
        assert len(manifest["metadata"]["name"]) <= 63  # a Job name is also a label value


def test_gpu_spec_carries_its_fields_into_the_valid_manifest():
    spec = KubernetesSpec.from_config(SPECS["gpus, tolerations, node selector"])
    manifest = job_manifest(_run(7, nproc_per_node=4), spec, attempt=2)
    kubernetes_validate.validate(manifest, TARGET_KUBERNETES_VERSION, strict=True)
    pod = manifest["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert container["resources"]["requests"] == {
        "cpu": "8",
        "memory": "64Gi",
        "nvidia.com/gpu": "4",
    }
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert [t["key"] for t in pod["tolerations"]] == [
        "nvidia.com/gpu",
        "node.kubernetes.io/unreachable",
        "team",
    ]
    # four ranks: torchrun's module launches them, each running the same trainer command
    assert container["command"][-3:] == ["manage.py", "run_trainer", "7"]
    assert container["command"][:6] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "4",
    ]
    assert manifest["metadata"]["namespace"] == "rl-team"


def test_the_validator_refuses_a_broken_job():
    """The check above can fail: the same validator refuses a Job with a wrongly typed field."""
    manifest = job_manifest(_run(), KubernetesSpec.from_config(SPECS["minimal"]), attempt=1)
    manifest["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "k", "tolerationSeconds": "soon"}
    ]
    with pytest.raises(kubernetes_validate.ValidationError, match="soon"):
        kubernetes_validate.validate(manifest, TARGET_KUBERNETES_VERSION, strict=True)
    manifest = job_manifest(_run(), KubernetesSpec.from_config(SPECS["minimal"]), attempt=1)
    manifest["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, TARGET_KUBERNETES_VERSION, strict=True)
