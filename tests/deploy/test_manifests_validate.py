"""Every rendered document of every overlay (and with the optional components) validates
against the official Kubernetes schemas, strictly: an unknown or misspelled field is an error."""

import copy

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions

from tests.deploy.manifests import CUSTOM_KINDS, NO_RENDERER, RENDERER, VARIANTS, render
from training.kubernetes import TARGET_KUBERNETES_VERSION

pytestmark = pytest.mark.skipif(RENDERER is None, reason=NO_RENDERER)

NEWEST = all_versions()[-1]
VERSIONS = sorted(
    {TARGET_KUBERNETES_VERSION, NEWEST}
)  # 1.30 and the newest schemas the package ships


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_document_validates_strictly(variant, version):
    docs = render(variant)
    checked = 0
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            continue  # no schema here; tests/deploy/test_custom_resources.py checks their structure
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    kinds = {d["kind"] for d in docs}
    assert {
        "Namespace",
        "Deployment",
        "Service",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "PodDisruptionBudget",
        "ConfigMap",
    } <= kinds
    assert checked >= 25


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_known_custom_resources_escape_the_schemas(variant):
    """Anything kubernetes-validate has no schema for must be one of the CRDs checked elsewhere."""
    unknown = set()
    for doc in render(variant):
        try:
            kubernetes_validate.validate(doc, TARGET_KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unknown.add((doc["apiVersion"], doc["kind"]))
    assert unknown <= CUSTOM_KINDS


def test_the_validation_can_fail():
    """The same call refuses a rendered Deployment with a misspelled field or a wrong type."""
    web = next(
        d
        for d in render("prod")
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "crucible-web"
    )
    typo = copy.deepcopy(web)
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"periodSeconds": 5}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, TARGET_KUBERNETES_VERSION, strict=True)
    wrong = copy.deepcopy(web)
    wrong["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, TARGET_KUBERNETES_VERSION, strict=True)
