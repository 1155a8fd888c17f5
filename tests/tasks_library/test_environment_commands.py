"""build_environment (a second build is a cache hit), environment_image (the build context of the
same environment as an image: parsed, pinned, non-root, its Deployment valid, and its spec
rebuilding the same bytes), gc_environments (only what no task version uses goes)."""

from __future__ import annotations

import json
from io import StringIO

import kubernetes_validate
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from dockerfile_parse import DockerfileParser
from kubernetes_validate.utils import all_versions

from sandboxes.environments.mount import store
from sandboxes.environments.spec import parse
from sandboxes.environments.store import manifest_digest
from sandboxes.runtimes import EXECUTORS, base_runtime
from tasks_library.environment_image import UID
from tasks_library.models import EnvironmentVersion
from training.kubernetes import TARGET_KUBERNETES_VERSION


@pytest.fixture
def data_environment(db) -> EnvironmentVersion:
    call_command("import_tasks", "data-analysis", stdout=StringIO())
    return EnvironmentVersion.objects.get(name="data-analysis")


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_second_build_is_a_cache_hit_and_recorded(data_environment):
    first = json.loads(run("build_environment", "data-analysis", "--json"))
    second = json.loads(run("build_environment", data_environment.content_hash[:10], "--json"))
    assert second["cache_hit"] is True and second["key"] == first["key"]
    data_environment.refresh_from_db()
    assert data_environment.build_status == "built" and data_environment.build_key == first["key"]
    assert data_environment.build_seconds > 0 and "pip install" in data_environment.build_log


def test_unknown_environment_is_named(db):
    with pytest.raises(CommandError, match="no environment 'nope'"):
        run("build_environment", "nope")


def test_environment_image_is_pinned_non_root_and_rebuilds_the_same_bytes(
    data_environment, tmp_path, settings
):
    out = tmp_path / "image"
    written = run("environment_image", "data-analysis", "--output", str(out)).split()
    assert sorted(p.rsplit("/", 1)[-1] for p in written) == [
        "Dockerfile",
        "README.txt",
        "environment.json",
        "sandbox-deployment.json",
    ]
    parser = DockerfileParser(path=str(out / "Dockerfile"))
    instructions = parser.structure
    args = {
        i["value"].split("=", 1)[0]: i["value"].split("=", 1)[1]
        for i in instructions
        if i["instruction"] == "ARG"
    }
    assert args["SANDBOX_IMAGE"] == "crucible/sandbox-python:python3.11"  # a tag, not latest
    froms = [i["value"] for i in instructions if i["instruction"] == "FROM"]
    assert froms == ["${SANDBOX_IMAGE} AS build", "${SANDBOX_IMAGE}"]
    last_from = max(k for k, i in enumerate(instructions) if i["instruction"] == "FROM")
    final = instructions[last_from:]
    users = [i["value"] for i in final if i["instruction"] == "USER"]
    assert users == [f"{UID}:{UID}"]  # the final stage runs as the sandbox user, numerically
    copies = [i["value"].split()[0] for i in instructions if i["instruction"] == "COPY"]
    assert all((out / src).exists() for src in copies if not src.startswith("--"))
    command = json.loads(next(i["value"] for i in final if i["instruction"] == "CMD"))
    runtime = command[command.index("--runtime") + 1]
    assert base_runtime(runtime) in EXECUTORS and "@" in runtime

    description = json.loads((out / "environment.json").read_text())
    assert description["packages"] == ["numpy==2.4.6", "pandas==3.1.1"]
    locked = {p["name"].lower() for p in description["lock"]}
    assert locked >= {"numpy", "pandas", "python-dateutil"}  # the pins and their dependencies
    for pin in description["lock"]:  # every package, pinned and hashed
        assert pin["version"] and len(pin["sha256"]) == 64, pin

    deployment = json.loads((out / "sandbox-deployment.json").read_text())
    for version in sorted({TARGET_KUBERNETES_VERSION, all_versions()[-1]}):
        kubernetes_validate.validate(deployment, version, strict=True)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["command"][-3] == runtime

    # What the image's build stage runs, into an empty store: the same key, the same bytes.
    settings.ENVIRONMENT_STORE = tmp_path / "image-store"
    built = json.loads(run("build_environment", "--spec", str(out / "environment.json"), "--json"))
    assert built == {"key": description["key"], "cache_hit": False}
    rebuilt = store().get(description["packages_hash"])
    assert manifest_digest(rebuilt) == description["packages_manifest_sha256"]


def test_environment_image_refuses_an_unpinned_base(data_environment, tmp_path):
    with pytest.raises(CommandError, match="not pinned"):
        run("environment_image", "data-analysis", "-o", str(tmp_path), "--base-image", "x:latest")


def test_gc_removes_only_what_no_task_version_uses(data_environment, tmp_path):
    used = parse("python3.11", list(data_environment.packages)).packages_hash()
    orphan = EnvironmentVersion.objects.create(
        content_hash="0" * 64, name="orphan", runtime="python3.11", packages=["six==1.17.0"]
    )
    unused = parse("python3.11", list(orphan.packages)).packages_hash()

    def fill(tree):
        (tree / "marker").write_text("x")
        return {}

    with override_settings(ENVIRONMENT_STORE=tmp_path / "gc-store"):
        for build_hash in (used, unused, "f" * 64):
            store().ensure(build_hash, {}, fill)
        outcome = json.loads(run("gc_environments", "--dry-run", "--json"))
        assert sorted(outcome["removed"]) == sorted([unused, "f" * 64])
        assert set(store().published()) == {used, unused, "f" * 64}  # a dry run removes nothing
        outcome = json.loads(run("gc_environments", "--json"))
        assert store().published() == [used] and outcome["kept"] == [used]
