"""Render the kustomize overlays of deploy/kubernetes and walk what they hold.

Rendering uses ``kubectl kustomize`` (kubectl 1.27+ embeds kustomize v5, which the overlays
need: components and ``labels``) or a standalone ``kustomize`` v5 binary; :data:`RENDERER` is
None when neither is on the PATH (or only older ones are), and the tests that render skip
saying which was found and why it cannot serve.

A *variant* is an overlay plus optional components (``prod+keda``): :func:`render` writes a
throwaway kustomization in a temporary directory that names the overlay as its resource, the
components, and the overlay's namespace, as a user adding a component to the overlay would.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("dev", "prod")
COMPONENTS = ("keda", "prometheus-operator", "gvisor", "sandbox-nested-namespaces")
# What each test renders: the overlays as shipped, and with the optional components on top.
VARIANTS = {
    "dev": ("dev", ()),
    "prod": ("prod", ()),
    "dev+keda+prometheus-operator": ("dev", ("keda", "prometheus-operator")),
    "prod+keda+prometheus-operator": ("prod", ("keda", "prometheus-operator")),
}
# Custom resources: no schema in kubernetes-validate; tests/deploy/test_custom_resources.py checks
# them.
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")


def _version(command: list[str]) -> tuple[int, int] | None:
    """``(major, minor)`` that ``command`` prints (``v1.32.4``, ``v5.5.0``...), None if it cannot
    say."""
    try:
        out = subprocess.run(
            command, check=False, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _renderer() -> tuple[list[str] | None, str]:
    """The command that renders a kustomization, or None and why there is none.

    kubectl embeds kustomize v5 from 1.27 on; an older one (Debian 12's kubernetes-client is
    1.20 with kustomize v2) refuses ``components`` and ``labels`` and cannot render these overlays.
    """
    reasons = []
    kubectl = shutil.which("kubectl")
    if kubectl:
        version = _version([kubectl, "version", "--client"])
        if version and version >= (1, 27):
            return [kubectl, "kustomize"], ""
        shown = ".".join(map(str, version)) if version else "of unknown version"
        reasons.append(
            f"kubectl at {kubectl} is {shown}, older than 1.27 (its kustomize predates v5)"
        )
    kustomize = shutil.which("kustomize")
    if kustomize:
        version = _version([kustomize, "version"])
        if version and version >= (5, 0):
            return [kustomize, "build"], ""
        reasons.append(f"kustomize at {kustomize} is older than v5")
    return None, "; ".join(reasons) or "neither kubectl nor kustomize is on the PATH"


RENDERER, _WHY_NOT = _renderer()
NO_RENDERER = f"cannot render the overlays (kubectl 1.27+ or kustomize v5 needed): {_WHY_NOT}"


@functools.cache
def _render_text(overlay: str, components: tuple[str, ...]) -> str:
    if RENDERER is None:
        raise RuntimeError(NO_RENDERER)
    if not components:
        target = KUBERNETES / "overlays" / overlay
        return subprocess.run(
            [*RENDERER, str(target)], check=True, capture_output=True, text=True
        ).stdout
    with tempfile.TemporaryDirectory(prefix="crucible-kustomize-") as tmp:
        # kustomize refuses absolute paths to other kustomizations: name them relative to tmp.
        relative = os.path.relpath(KUBERNETES, tmp)
        overlay_file = yaml.safe_load(
            (KUBERNETES / "overlays" / overlay / "kustomization.yaml").read_text()
        )
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": overlay_file[
                "namespace"
            ],  # as if the components were listed in the overlay itself
            "resources": [f"{relative}/overlays/{overlay}"],
            "components": [f"{relative}/components/{name}" for name in components],
        }
        Path(tmp, "kustomization.yaml").write_text(json.dumps(kustomization))
        return subprocess.run([*RENDERER, tmp], check=True, capture_output=True, text=True).stdout


def render(variant: str) -> list[dict]:
    """Every document of ``variant`` (a key of :data:`VARIANTS`), as plain dicts (a fresh copy)."""
    overlay, components = VARIANTS[variant]
    return [doc for doc in yaml.safe_load_all(_render_text(overlay, components)) if doc]


def find(docs: list[dict], kind: str, name: str) -> dict:
    """The one document of ``kind`` named ``name``; KeyError when there is none."""
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"no {kind} {name} in the rendered manifests")


def pod_templates(docs: list[dict]) -> list[tuple[str, dict, dict]]:
    """``(kind/name, workload, pod spec)`` for every workload's pod template."""
    out = []
    for doc in docs:
        if doc["kind"] in WORKLOAD_KINDS:
            out.append(
                (f"{doc['kind']}/{doc['metadata']['name']}", doc, doc["spec"]["template"]["spec"])
            )
    return out


def containers(pod: dict, *, init: bool = True) -> list[dict]:
    return [*(pod.get("initContainers") or [] if init else []), *pod["containers"]]


def trainer_spec(docs: list[dict]) -> dict:
    """The trainer spec the overlay hands the kubernetes backend (ConfigMap
    crucible-trainer-spec)."""
    config_map = next(
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("crucible-trainer-spec")
    )
    return json.loads(config_map["data"]["spec.json"])


def namespace_of(docs: list[dict]) -> str:
    (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
    return namespace["metadata"]["name"]
