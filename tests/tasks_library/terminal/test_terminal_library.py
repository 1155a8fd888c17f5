"""Terminal tasks in the library: a Harbor-format directory and a Terminal-Bench-format one,
written here, import as terminal task versions, validate in sandbox sessions (the reference
solution passes every run, the untouched state fails) and export as Harbor directories with
identical content; a broken reference and a verifier the untouched state passes are
quarantined with their evidence; bad directories are refused naming the file."""

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.models import TaskSet, TaskVersion
from tasks_library.terminal.layout import read_task
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.environments import TERMINAL_DEBIAN_PACKAGES
from tests.sandboxes.conftest import started_session_pool
from tests.tasks_library.terminal.test_task_layouts import write

APT = (
    "RUN apt-get update && apt-get install -y --no-install-recommends "
    + " ".join(TERMINAL_DEBIAN_PACKAGES)
    + "\n"
)
HARBOR = {
    "instruction.md": "Write the sum of the numbers in /app/numbers.txt to /app/answer.txt.\n",
    "task.toml": (
        'version = "1.0"\n\n[task]\nname = "tests/sum-numbers"\n\n[metadata]\n'
        'category = "data-analysis"\ntags = ["arithmetic"]\n\n[verifier]\ntimeout_sec = 30.0\n'
        "\n[agent]\ntimeout_sec = 60.0\n"
    ),
    "environment/Dockerfile": (
        f"FROM debian:trixie-slim\n{APT}WORKDIR /app\nCOPY numbers.txt /app/numbers.txt\n"
    ),
    "environment/numbers.txt": "3\n4\n35\n",
    "solution/solve.sh": "#!/bin/bash\npaste -sd+ numbers.txt | bc > answer.txt 2>/dev/null "
    "|| python3 -c 'print(sum(int(l) for l in open(\"numbers.txt\")))' > answer.txt\n",
    "tests/test.sh": (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        'if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    ),
    "tests/expected.txt": "42\n",
}
TERMINAL_BENCH = {
    "task.yaml": (
        "instruction: |\n  Count the ERROR lines of /app/app.log into /app/count.txt.\n"
        "difficulty: easy\ncategory: system-operations\ntags: [logs]\n"
        "max_agent_timeout_sec: 60\nmax_test_timeout_sec: 30\n"
    ),
    "Dockerfile": (
        f"FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\n{APT}"
        "WORKDIR /app\nCOPY app.log /app/app.log\n"
    ),
    "app.log": "INFO a\nERROR b\nWARN c\nERROR d\n",
    "solution.sh": "#!/bin/bash\ngrep -c ERROR /app/app.log > /app/count.txt\n",
    "run-tests.sh": '#!/bin/bash\nset -e\n[ "$(cat /app/count.txt)" = 2 ]\n',
    "tests/expected.txt": "2\n",
}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """Session slots on the queue terminal environments name (python3.13), for this module."""
    with started_session_pool(tmp_path_factory.mktemp("stores"), "python3.13") as started:
        yield started


def import_dir(directory, taskset) -> None:
    call_command(
        "import_tasks", "terminal", str(directory), "--taskset", taskset, stdout=StringIO()
    )


def versions_of(taskset: str) -> list[TaskVersion]:
    return list(
        TaskSet.objects.get(name=taskset)
        .task_versions.select_related("task", "environment", "test_suite", "workspace")
        .order_by("task__task_id")
    )


@pytest.mark.django_db(transaction=True)
def test_harbor_and_terminal_bench_tasks_import_validate_and_export(pool, tmp_path):
    harbor = write(tmp_path / "sets" / "sum-numbers", HARBOR)
    bench = write(tmp_path / "sets" / "count-errors", TERMINAL_BENCH)
    import_dir(tmp_path / "sets", "terminal-tests")
    versions = versions_of("terminal-tests")
    assert [v.task.task_id for v in versions] == ["count-errors", "tests/sum-numbers"]
    assert all(v.is_terminal and not v.is_repository for v in versions)
    summed = versions[1]
    assert summed.prompt == HARBOR["instruction.md"]
    assert summed.environment.runtime == "python3.13"
    assert summed.environment.debian_packages == sorted(TERMINAL_DEBIAN_PACKAGES)
    assert summed.test_suite.harness == "terminal" and summed.test_suite.timeout_s == 30.0
    assert set(summed.test_suite.hidden_files.files()) == {"test.sh", "expected.txt"}

    started = time.monotonic()
    task_versions_validate(versions=versions, options=Options(reference_runs=2))
    print(f"validated 2 terminal tasks in {time.monotonic() - started:.1f} s")
    for version in versions:
        version.refresh_from_db()
        assert version.verdict == TaskVersion.VERDICT_VALID, (version, version.report)
        assert version.report["reference"]["rewards"] == [1.0, 1.0]
        assert version.report["untouched"]["reward"] == 0.0
        assert not version.quarantined

    out = tmp_path / "exported"
    call_command(
        "export_tasks", "--taskset", "terminal-tests", "--format", "harbor", "--output", str(out),
        stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip
    exported = {read_task(d).name: read_task(d) for d in sorted(out.iterdir())}
    assert exported["tests/sum-numbers"].content_hash() == read_task(harbor).content_hash()
    assert exported["count-errors"].content_hash() == read_task(bench).content_hash()
    for path, data in HARBOR.items():  # byte for byte
        assert (out / "tests__sum-numbers" / path).read_bytes() == data.encode()
    import_dir(out, "terminal-tests-again")  # the same content: no new version
    assert [v.pk for v in versions_of("terminal-tests-again")] == [v.pk for v in versions]


@pytest.mark.django_db(transaction=True)
def test_a_broken_reference_and_a_trivial_verifier_are_quarantined_with_evidence(pool, tmp_path):
    broken = dict(HARBOR, **{"solution/solve.sh": "#!/bin/bash\necho 41 > answer.txt\n"})
    broken["task.toml"] = HARBOR["task.toml"].replace("tests/sum-numbers", "tests/broken")
    trivial = dict(HARBOR, **{"tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"})
    trivial["task.toml"] = HARBOR["task.toml"].replace("tests/sum-numbers", "tests/trivial")
    write(tmp_path / "bad" / "broken", broken)
    write(tmp_path / "bad" / "trivial", trivial)
    import_dir(tmp_path / "bad", "terminal-bad")
    versions = versions_of("terminal-bad")
    task_versions_validate(versions=versions, options=Options(reference_runs=2))
    found = {}
    for version in versions:
        version.refresh_from_db()
        found[version.task.task_id] = version
    assert found["tests/broken"].verdict == TaskVersion.VERDICT_BROKEN_REFERENCE
    assert found["tests/broken"].quarantined
    assert found["tests/broken"].report["reference"]["rewards"] == [0.0, 0.0]
    assert "earned 0.0" in found["tests/broken"].verdict_reasons[0]
    assert found["tests/trivial"].verdict == TaskVersion.VERDICT_TRIVIAL_PASSES
    assert found["tests/trivial"].quarantined
    assert found["tests/trivial"].report["untouched"]["reward"] == 1.0


@pytest.mark.django_db
def test_directories_that_cannot_run_are_refused_naming_the_file(tmp_path):
    cases = {
        "no-workdir": (
            {"environment/Dockerfile": f"FROM debian:trixie-slim\n{APT}COPY numbers.txt /n.txt\n"},
            "WORKDIR / cannot hold the agent's files",
        ),
        "missing-source": (
            {"environment/Dockerfile": f"FROM debian:trixie-slim\n{APT}WORKDIR /app\nCOPY x /x\n"},
            "environment/Dockerfile copies x, which is not in environment/",
        ),
        "reserved": (
            {
                "environment/Dockerfile": (
                    f"FROM debian:trixie-slim\n{APT}WORKDIR /app\nCOPY numbers.txt /tests/n.txt\n"
                )
            },
            "where Crucible mounts its own",
        ),
        "bad-package": (
            {
                "environment/Dockerfile": (
                    "FROM debian:trixie-slim\nRUN apt-get install -y nginx=1.0=2\nWORKDIR /app\n"
                )
            },
            "environment/Dockerfile",
        ),
        "services": (
            {"task.toml": HARBOR["task.toml"] + "\n[metadata.crucible]\nservices = 'nginx'\n"},
            "services must be a list",
        ),
    }
    for name, (changes, says) in cases.items():
        directory = write(tmp_path / name, {**HARBOR, **changes})
        with pytest.raises(CommandError, match="nothing was written") as caught:
            import_dir(directory, f"bad-{name}")
        assert says in str(caught.value), (name, caught.value)
        assert not TaskSet.objects.filter(name=f"bad-{name}").exists()
