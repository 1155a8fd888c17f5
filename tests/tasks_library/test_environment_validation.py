"""Task versions validate in their environment version: the data-analysis set in its pinned
numpy/pandas, the Python 3.13 set in the Debian root's Python; the same tasks in an environment
without the package, or in Python 3.11, fail with the missing import or attribute named; an
environment that cannot be built leaves its versions unvalidated, never broken."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from console.management.stack import Stack
from tasks_library.importers.crucible import shipped_path
from tasks_library.importers.jsonl import read_jsonl
from tasks_library.models import EnvironmentVersion, TaskVersion
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.environments import DATA_PACKAGES

QUICK = Options(reference_runs=2, mutants=4)
# Where only the reference's failure matters (a missing package, an older Python).
REFERENCE_ONLY = Options(reference_runs=1, mutants=0, examples=False)


@pytest.fixture(scope="module", autouse=True)
def python313_workers():
    """Workers of the python3.13 queue (its root built on first use, a cache hit after)."""
    with Stack() as stack:
        stack.sandbox_workers("python3.13", concurrency=2)
        yield


def import_rows(tmp_path, name: str, *, environment: dict | None = None) -> list[TaskVersion]:
    """Import a shipped task file, optionally with every row's environment replaced."""
    path = tmp_path / f"{name}.jsonl"
    rows = [row for _where, row in read_jsonl(shipped_path(name), ())]
    with open(path, "w") as handle:
        for row in rows:
            if environment is not None:
                row["environment"] = environment
            handle.write(json.dumps(row) + "\n")
    call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    return list(
        TaskVersion.objects.select_related("task", "test_suite", "environment").filter(
            task__task_id__in=[r["task_id"] for r in rows],
            environment__packages=(environment or rows[0]["environment"])["packages"],
            environment__runtime=(environment or rows[0]["environment"])["runtime"],
        )
    )


def verdicts(versions: list[TaskVersion]) -> dict[str, tuple[str, list[str]]]:
    for version in versions:
        version.refresh_from_db()
    return {v.task.task_id: (v.verdict, v.verdict_reasons) for v in versions}


@pytest.mark.django_db(transaction=True)
def test_data_analysis_validates_in_its_environment_and_not_without_it(tmp_path):
    versions = import_rows(tmp_path, "data_analysis")
    assert len(versions) == 7
    environment = versions[0].environment
    assert environment.packages == DATA_PACKAGES
    task_versions_validate(versions=versions, options=QUICK)
    found = verdicts(versions)
    assert {v for v, _r in found.values()} <= {"valid", "weak_suite"}, found
    environment.refresh_from_db()
    assert environment.build_status == "built"
    installed = {p["name"].lower(): p["version"] for p in environment.resolved_packages}
    assert installed["numpy"] == "2.4.6" and installed["pandas"] == "3.1.1"
    assert "python-dateutil" in installed  # a dependency pip resolved, recorded too
    assert environment.size_bytes > 10 * 2**20
    report = TaskVersion.objects.get(pk=versions[0].pk).report["environment"]
    assert report["ran_in"] == [environment.build_key] and len(environment.build_key) == 64

    bare = {"name": "bare", "runtime": "python3.11", "packages": [], "image": ""}
    without = import_rows(tmp_path, "data_analysis", environment=bare)
    task_versions_validate(versions=without, options=REFERENCE_ONLY)
    for task_id, (verdict, reasons) in verdicts(without).items():
        assert verdict == "broken_reference", (task_id, verdict)
        text = " ".join(reasons)
        assert "No module named" in text and ("'pandas'" in text or "'numpy'" in text), text


@pytest.mark.django_db(transaction=True)
def test_python313_tasks_pass_in_313_and_fail_in_311_naming_the_feature(tmp_path):
    versions = import_rows(tmp_path, "python_versions")
    assert {v.environment.runtime for v in versions} == {"python3.13"}
    task_versions_validate(versions=versions, options=QUICK)
    found = verdicts(versions)
    assert {v for v, _r in found.values()} <= {"valid", "weak_suite"}, found
    report = TaskVersion.objects.get(pk=versions[0].pk).report["environment"]
    assert report["runtime"] == "python3.13" and report["ran_in"] == [report["key"]]

    old = {"name": "python", "runtime": "python3.11", "packages": [], "image": ""}
    in_311 = verdicts(
        task_versions_validate(
            versions=import_rows(tmp_path, "python_versions", environment=old),
            options=REFERENCE_ONLY,
        )
    )
    assert in_311["python-versions/word-lengths"][0] in ("valid", "weak_suite")
    for task_id, attribute in (
        ("python-versions/fused-multiply-add", "module 'math' has no attribute 'fma'"),
        ("python-versions/replace-fields", "module 'copy' has no attribute 'replace'"),
        ("python-versions/batched-sums", "module 'itertools' has no attribute 'batched'"),
    ):
        verdict, reasons = in_311[task_id]
        assert verdict == "broken_reference" and attribute in " ".join(reasons), in_311[task_id]


@pytest.mark.django_db(transaction=True)
def test_an_environment_that_cannot_build_leaves_its_versions_unvalidated(tmp_path):
    missing = {
        "name": "typo",
        "runtime": "python3.11",
        "packages": ["crucible-no-such-package-7f3a==1.0.0"],
        "image": "",
    }
    versions = import_rows(tmp_path, "data_analysis", environment=missing)[:2]
    task_versions_validate(versions=versions, options=QUICK)
    for verdict, reasons in verdicts(versions).values():
        assert verdict == "pending"
        assert "crucible-no-such-package-7f3a" in reasons[0] and "typo@" in reasons[0]
    environment = EnvironmentVersion.objects.get(name="typo")
    assert environment.build_status == "failed"
    assert "crucible-no-such-package-7f3a" in environment.build_error
    assert not any(v.quarantined for v in TaskVersion.objects.filter(environment=environment))

    py39 = {"name": "old", "runtime": "python3.9", "packages": [], "image": ""}
    versions = import_rows(tmp_path, "python_versions", environment=py39)[:1]
    task_versions_validate(versions=versions, options=QUICK)
    verdict, reasons = verdicts(versions)["python-versions/fused-multiply-add"]
    assert verdict == "pending" and "python3.9 cannot be provided here" in reasons[0]


@pytest.mark.django_db
def test_unpinned_packages_are_refused_at_import_naming_the_package(tmp_path):
    loose = {"name": "loose", "runtime": "python3.11", "packages": ["pandas>=2"], "image": ""}
    with pytest.raises(Exception, match=r"environment\.packages.*'pandas>=2' is not pinned"):
        import_rows(tmp_path, "data_analysis", environment=loose)
    assert not EnvironmentVersion.objects.filter(name="loose").exists()
