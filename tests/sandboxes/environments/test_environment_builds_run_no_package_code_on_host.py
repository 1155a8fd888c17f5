"""A package's build code never runs on the host. Environments install wheels only; a package
that has only an sdist is refused, saying why and how to allow a source build, through every
path that builds (materialise, the build_environment command, the API's build through Celery,
validation of an imported dataset's environment). An environment that allows source builds
builds in a sandbox: the same hostile sdist builds there, its probes show what it could not do
(read /etc/shadow, write the host, reach Redis, PostgreSQL, the internet or the metadata
service, get past the registry proxy, be root), and marker files on the host prove nothing of it
ran here."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sandboxes.environments.build import materialise
from sandboxes.environments.spec import parse
from sandboxes.environments.store import EnvironmentBuildError, EnvironmentStore
from tasks_library.importers.crucible import examples_path
from tasks_library.models import EnvironmentVersion, TaskVersion
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.package_index import hostile_index
from tests.tasks_library.conftest import (  # noqa: F401 (fixtures)
    client_for,
    curator,
    eager_celery,
    roles,
)


@pytest.fixture
def index(tmp_path, monkeypatch, settings):
    """A package index holding only the sdist of ``evilcalc==1.0``; pip here (and in the build
    sandbox, which reads the same configuration) uses it and nothing else."""
    settings.ENVIRONMENT_STORE = tmp_path / "store"
    with hostile_index(tmp_path, monkeypatch) as (_url, markers):
        yield markers


def no_markers(markers) -> None:
    assert not markers.exists(), sorted(p.name for p in markers.iterdir())


def test_wheels_only_refuses_an_sdist_and_runs_none_of_it(index, tmp_path):
    store = EnvironmentStore(tmp_path / "store")
    with pytest.raises(EnvironmentBuildError) as caught:
        materialise(parse("python3.11", ["evilcalc==1.0"]), environment_store=store)
    assert caught.value.kind == "missing_package" and caught.value.package.startswith("evilcalc")
    assert "installs wheels only" in str(caught.value)
    assert "source_builds: true" in str(caught.value)
    no_markers(index)
    assert store.published() == []


@pytest.mark.django_db
def test_the_command_and_the_api_refuse_it_too(index, curator, eager_celery):
    env = EnvironmentVersion.objects.create(
        content_hash="1" * 64, name="evil", runtime="python3.11", packages=["evilcalc==1.0"]
    )
    with pytest.raises(CommandError, match="installs wheels only"):
        call_command("build_environment", "evil", stdout=StringIO(), stderr=StringIO())
    no_markers(index)
    reply = client_for(curator).post(f"/api/environments/{env.pk}/build/")
    env.refresh_from_db()
    assert env.build_status == "failed" and "installs wheels only" in env.build_error, reply
    no_markers(index)


@pytest.mark.django_db
def test_validating_an_imported_datasets_environment_refuses_it_too(index, tmp_path):
    line = json.loads(examples_path().read_text().splitlines()[0])
    line["environment"] = {"name": "evil", "runtime": "python3.11", "packages": ["evilcalc==1.0"]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(line) + "\n")
    call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    versions = list(TaskVersion.objects.all())
    task_versions_validate(versions=versions, options=Options(reference_runs=1, mutants=0))
    version = TaskVersion.objects.get()
    assert version.verdict == "pending" and "installs wheels only" in version.verdict_reasons[0]
    no_markers(index)


def test_an_opted_in_source_build_runs_in_the_sandbox(index, tmp_path):
    store = EnvironmentStore(tmp_path / "store")
    spec = parse("python3.11", ["evilcalc==1.0"], source_builds=True)
    built = materialise(spec, environment_store=store).packages
    no_markers(index)  # its setup.py and backend ran, but not here
    site = built.tree / "site-packages"
    assert (site / "calc.py").read_bytes().startswith(b"def clamp")
    assert built.record["resolved"][0]["name"] == "evilcalc"
    assert "build sandbox" in built.record["log"]
    probes = json.loads((site / "probe.json").read_text())
    assert probes and all(outcome.startswith("failed") for outcome in probes.values()), probes
    assert "example.com:443" in built.record["log"]  # the registry proxy refused it, and said so
    assert store.verify(built.hash)  # a published layer like any other
    # The opt-in is part of the layer's identity: a wheel-only spec is another build.
    assert spec.packages_hash() != parse("python3.11", ["evilcalc==1.0"]).packages_hash()


def test_source_builds_are_refused_where_no_sandbox_can_build(tmp_path):
    for runtime in ("python3.13", "node20"):
        with pytest.raises(Exception, match="source builds run in a sandbox"):
            parse(runtime, [], source_builds=True)
