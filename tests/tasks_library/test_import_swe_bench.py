"""import_tasks swe-bench FILE --repo PATH: SWE-bench-shaped rows, the repository at base_commit
read from a local git repository or an archive; bad rows name row and field, nothing written."""

import json
import os
import subprocess
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sandboxes.repository.patches import make_patch
from sandboxes.sessions.workspace import Workspace
from tasks_library.models import RepositoryWorkspace, Task, TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.repository_helpers import (
    BUGGY,
    FAIL_TO_PASS,
    FIXED,
    HIDDEN,
    PASS_TO_PASS,
    record,
)
from tests.tasks_library.test_crucible_format import _wipe

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(repo, *args) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, env=GIT_ENV, check=True
    )
    return done.stdout.decode().strip()


def write_tree(root, files) -> None:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)


@pytest.fixture
def repo(tmp_path):
    """A git repository: the buggy tree at base_commit, the fix committed after it."""
    root = tmp_path / "calc"
    root.mkdir()
    git(root, "init", "-q")
    write_tree(root, BUGGY)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    base = git(root, "rev-parse", "HEAD")
    write_tree(root, FIXED)
    git(root, "commit", "-qam", "fix clamp")
    return root, base


def row(base: str, **changes) -> dict:
    fields = {
        "instance_id": "acme__calc-1",
        "repo": "acme/calc",
        "base_commit": base,
        "patch": make_patch(BUGGY, FIXED),
        "test_patch": make_patch({}, HIDDEN),
        "problem_statement": "clamp(50, 0, 10) returns 50",
        "FAIL_TO_PASS": json.dumps(FAIL_TO_PASS + ["tests/test_hidden.py::test_clamp_at_bound"]),
        "PASS_TO_PASS": PASS_TO_PASS,
        "environment_setup_commit": base,
        "version": "1.0",
    }
    fields.update(changes)
    return fields


def run(path, *repos, taskset=None) -> str:
    out = StringIO()
    args = ["import_tasks", "swe-bench", str(path)]
    for value in repos:
        args += ["--repo", str(value)]
    if taskset:
        args += ["--taskset", taskset]
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_rows_import_from_a_local_git_repository(repo, write_jsonl):
    root, base = repo
    path = write_jsonl([row(base)], "swe.jsonl")
    assert "imported 1 repository tasks: 1 new versions" in run(path, root)
    version = TaskVersion.objects.get(task__task_id="acme__calc-1")
    # The workspace is the tree at base_commit, not the later fix.
    assert version.workspace.files() == dict(sorted(BUGGY.items()))
    assert version.test_suite.hidden_files.files() == HIDDEN
    assert version.test_suite.fail_to_pass == [
        *FAIL_TO_PASS,
        "tests/test_hidden.py::test_clamp_at_bound",
    ]
    assert version.test_suite.pass_to_pass == PASS_TO_PASS
    assert version.reference_solution == make_patch(BUGGY, FIXED)
    assert version.environment.packages == ["pytest==8.3.4"]
    assert version.task.source == "swe-bench"
    assert version.task.metadata == {
        "repo": "acme/calc",
        "base_commit": base,
        "environment_setup_commit": base,
        "version": "1.0",
    }
    # Importing again changes nothing.
    assert "0 new versions, 1 unchanged" in run(path, f"acme/calc={root}")


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_an_archive_of_the_tree_gives_the_same_workspace(repo, tmp_path, write_jsonl, kind):
    root, base = repo
    archive = tmp_path / f"calc.{kind}"
    git(root, "archive", f"--format={kind}", "--prefix=calc-1.0/", "-o", str(archive), base)
    run(write_jsonl([row(base)], "swe.jsonl"), archive)
    version = TaskVersion.objects.get()
    assert version.workspace.digest == Workspace.from_files(BUGGY).digest


@pytest.mark.django_db
def test_an_archive_of_another_commit_is_refused(repo, tmp_path, write_jsonl):
    root, base = repo
    archive = tmp_path / "calc.tar"
    git(root, "archive", "--format=tar", "-o", str(archive), "HEAD")  # the fixed commit
    with pytest.raises(CommandError, match=r"swe.jsonl:1: field 'base_commit': .* not base_commit"):
        run(write_jsonl([row(base)], "swe.jsonl"), archive)
    assert not TaskVersion.objects.exists()


BAD_ROWS = {
    "a patch that does not apply": (
        lambda base: {"patch": make_patch(BUGGY, FIXED).replace("return max(low, x)", "return 1")},
        "field 'patch': patch does not apply",
    ),
    "a test id that does not exist": (
        lambda base: {"PASS_TO_PASS": ["tests/test_gone.py::test_x"]},
        "field 'PASS_TO_PASS': test id 'tests/test_gone.py::test_x'",
    ),
    "a base_commit not in the repository": (
        lambda base: {"base_commit": "0" * 40},
        f"field 'base_commit': base_commit '{'0' * 40}' is not a commit of the repository",
    ),
    "the lists as a number": (
        lambda base: {"FAIL_TO_PASS": 3},
        "field 'FAIL_TO_PASS': expected a list of test ids (or a JSON string of one), got int",
    ),
    "the lists as a string that is not JSON": (
        lambda base: {"PASS_TO_PASS": "tests/test_ops.py::test_add"},
        "field 'PASS_TO_PASS': a string that is not a JSON list of test ids",
    ),
    "the lists as a JSON object": (
        lambda base: {"PASS_TO_PASS": '{"a": 1}'},
        "field 'PASS_TO_PASS': expected a list of test ids (or a JSON string of one), got dict",
    ),
    "a test patch that does not apply": (
        lambda base: {"test_patch": make_patch({"tests/test_ops.py": b"nothing\n"}, {})},
        "field 'test_patch': patch does not apply",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_bad_row_names_row_and_field_and_writes_nothing(repo, write_jsonl, case):
    root, base = repo
    changes, message = BAD_ROWS[case]
    good = row(base, instance_id="acme__calc-0")
    path = write_jsonl([good, row(base, **changes(base))], "swe.jsonl")
    with pytest.raises(CommandError) as caught:
        run(path, root)
    text = str(caught.value)
    assert text.startswith("import failed, nothing was written: ")
    assert f"{path}:2: {message}" in text
    assert not Task.objects.exists() and not RepositoryWorkspace.objects.exists()


@pytest.mark.django_db
def test_a_repository_path_that_is_not_there(tmp_path, write_jsonl):
    path = write_jsonl([row("abc1234")], "swe.jsonl")
    with pytest.raises(CommandError, match=r"swe.jsonl:1: field 'repo': repository .* does not"):
        run(path, tmp_path / "nowhere")
    with pytest.raises(CommandError, match=r"field 'repo': no local repository for 'acme/calc'"):
        run(path, f"other/project={tmp_path}")
    with pytest.raises(CommandError, match="not a git repository"):
        run(path, tmp_path)
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_export_as_swe_bench_then_import_gives_identical_hashes(tmp_path):
    repository_tasks_import(
        [
            record("calc/clamp-1", hidden_files=dict(HIDDEN), tags=["clamp"]),
            record(
                "calc/clamp-2",
                problem_statement="clamp exceeds high",
                # Names git must be told quoted: a quote, a backslash, a space, non-ASCII.
                files={**BUGGY, 'docs/a "quoted"\\name é.txt': b"odd\n"},
            ),
        ],
        author="alice",
    )
    before = sorted(TaskVersion.objects.values_list("task__task_id", "content_hash"))
    out, git_dir = tmp_path / "rows.jsonl", tmp_path / "trees"
    call_command(
        "export_tasks",
        "--format",
        "swe-bench",
        "--git-repo",
        str(git_dir),
        "-o",
        str(out),
        stderr=StringIO(),
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["instance_id"] for r in rows] == ["calc/clamp-1", "calc/clamp-2"]
    # One commit per tree, tagged by its digest, in a repository of their own.
    digests = [v.workspace_id for v in TaskVersion.objects.order_by("task__task_id")]
    assert git(git_dir, "tag").split() == sorted(f"crucible/{d[:16]}" for d in digests)
    assert rows[0]["base_commit"] != rows[1]["base_commit"]
    assert rows[0]["test_patch"].startswith("diff --git a/tests/test_hidden.py")
    assert rows[1]["test_patch"] == ""
    _wipe()
    RepositoryWorkspace.objects.all().delete()
    run(out, git_dir)
    assert sorted(TaskVersion.objects.values_list("task__task_id", "content_hash")) == before
