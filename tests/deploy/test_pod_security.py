"""Pod Security Standards: every pod the overlays run, the trainer Job the backend builds from
their spec included, is admitted by the level its namespace enforces (restricted, except where
the sandbox-nested-namespaces component lowers it, saying so); and the checker itself catches
each control of the restricted profile (tests/deploy/pod_security.py)."""

import copy

import pytest

from tests.deploy import pod_security
from tests.deploy.manifests import (
    NO_RENDERER,
    RENDERER,
    VARIANTS,
    namespace_of,
    pod_templates,
    render,
    trainer_spec,
)
from training.kubernetes import KubernetesSpec, job_manifest
from training.models import TrainingRun

LEVEL_LABEL = "pod-security.kubernetes.io/enforce"

GOOD = {
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "containers": [
        {
            "name": "c",
            "image": "i:1",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    ],
    "volumes": [{"name": "t", "emptyDir": {}}],
}
# One breach per control of the restricted profile (baseline's included), and the words it must
# give.
BREACHES = {
    "host network": (lambda p: p.update(hostNetwork=True), "Host Namespaces"),
    "host pid": (lambda p: p.update(hostPID=True), "Host Namespaces"),
    "privileged": (
        lambda p: p["containers"][0]["securityContext"].update(privileged=True),
        "Privileged Containers",
    ),
    "added capability": (
        lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
        "Capabilities",
    ),
    "capabilities not dropped": (
        lambda p: p["containers"][0]["securityContext"].pop("capabilities"),
        "Capabilities",
    ),
    "hostPath": (
        lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "HostPath Volumes",
    ),
    "host port": (
        lambda p: p["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
        "Host Ports",
    ),
    "apparmor unconfined": (
        lambda p: p["containers"][0]["securityContext"].update(
            appArmorProfile={"type": "Unconfined"}
        ),
        "AppArmor",
    ),
    "selinux type": (
        lambda p: p["securityContext"].update(seLinuxOptions={"type": "spc_t"}),
        "SELinux",
    ),
    "proc unmasked": (
        lambda p: p["containers"][0]["securityContext"].update(procMount="Unmasked"),
        "/proc Mount Type",
    ),
    "seccomp unconfined": (
        lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "Seccomp",
    ),
    "seccomp unset": (lambda p: p["securityContext"].pop("seccompProfile"), "Seccomp"),
    "unsafe sysctl": (
        lambda p: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "Sysctls",
    ),
    "nfs volume": (
        lambda p: p["volumes"].append({"name": "n", "nfs": {"server": "s", "path": "/"}}),
        "Volume Types",
    ),
    "escalation allowed": (
        lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
        "Privilege Escalation",
    ),
    "root allowed": (lambda p: p["securityContext"].pop("runAsNonRoot"), "Running as Non-root"),
    "uid 0": (
        lambda p: p["containers"][0]["securityContext"].update(runAsUser=0),
        "Running as Non-root user",
    ),
    "init container escalates": (
        lambda p: p.update(initContainers=[{"name": "i", "image": "i:1"}]),
        "Privilege Escalation",
    ),
}


def test_the_checker_admits_a_restricted_pod():
    assert pod_security.violations(copy.deepcopy(GOOD)) == []
    assert pod_security.strictest_level(copy.deepcopy(GOOD)) == "restricted"


@pytest.mark.parametrize("breach", BREACHES)
def test_the_checker_refuses_each_control(breach):
    pod = copy.deepcopy(GOOD)
    mutate, control = BREACHES[breach]
    mutate(pod)
    found = pod_security.violations(pod, "restricted")
    assert any(line.startswith(control) for line in found), found


def test_baseline_is_less_strict_than_restricted():
    pod = copy.deepcopy(GOOD)
    pod["securityContext"].pop("runAsNonRoot")  # restricted only
    assert pod_security.violations(pod, "baseline") == []
    assert pod_security.strictest_level(pod) == "baseline"
    pod["hostNetwork"] = True
    assert pod_security.strictest_level(pod) == "privileged"


def _trainer_pod(docs) -> tuple[str, dict]:
    spec = KubernetesSpec.from_config(trainer_spec(docs))
    job = job_manifest(
        TrainingRun(pk=7, config={"nproc_per_node": 2}, total_steps=1), spec, attempt=1
    )
    return "Job/" + job["metadata"]["name"], job["spec"]["template"]["spec"]


@pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_pod_meets_its_namespace_level(variant):
    docs = render(variant)
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    enforced = namespace["metadata"]["labels"][LEVEL_LABEL]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/audit"] == "restricted"
    pods = [
        (name, pod, workload["spec"]["template"].get("metadata", {}).get("annotations", {}))
        for name, workload, pod in pod_templates(docs)
    ]
    trainer_name, trainer = _trainer_pod(docs)
    pods.append((trainer_name, trainer, {}))
    levels = {}
    for name, pod, annotations in pods:
        assert pod_security.violations(pod, enforced, annotations=annotations) == [], name
        levels[name] = pod_security.strictest_level(pod, annotations=annotations)
    # The namespace enforces the strictest level every pod meets: no looser than it must be.
    assert enforced == min(levels.values(), key=pod_security.LEVELS.index), levels
    # Everything but the sandboxes of the runc component is restricted, the trainer Job included.
    relaxed = {name for name, level in levels.items() if level != "restricted"}
    if "dev" in variant:  # the dev overlay uses components/sandbox-nested-namespaces
        assert relaxed == {"Deployment/crucible-sandbox-python", "Deployment/crucible-sandbox-node"}
    else:
        assert relaxed == set()
    assert namespace_of(docs) == KubernetesSpec.from_config(trainer_spec(docs)).namespace
