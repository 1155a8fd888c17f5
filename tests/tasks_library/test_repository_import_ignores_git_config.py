"""import_tasks swe-bench reads a repository from outside without running its git configuration:
filter drivers (smudge, clean, process), textconv, fsmonitor, hooks and hooksPath, include.path,
an ext:: submodule. Marker files on the host prove nothing ran, and the import itself works: the
workspace is the commit's bytes as stored (no filter, no export-subst)."""

import pytest

from tasks_library.models import TaskVersion
from tests.tasks_library.hostile_git import hostile_repository, markers_left, prove_armed
from tests.tasks_library.repository_helpers import BUGGY
from tests.tasks_library.test_import_swe_bench import row, run


@pytest.mark.django_db
def test_a_hostile_repository_imports_and_runs_nothing(tmp_path, write_jsonl):
    markers = tmp_path / "markers"
    root = tmp_path / "calc"
    commit = hostile_repository(root, BUGGY, markers)
    # The repository is armed: git archive there (what the importer ran before) runs its filter.
    assert any("smudge" in name for name in prove_armed(root, markers, commit))

    path = write_jsonl([row(commit)], "swe.jsonl")
    assert "imported 1 repository tasks: 1 new versions" in run(path, root)
    assert markers_left(markers) == []

    files = TaskVersion.objects.get().workspace.files()
    # The committed bytes, not the smudge filter's upper case, not export-subst's expansion.
    assert files["calc/ops.py"] == BUGGY["calc/ops.py"]
    assert files["SUBST"] == b"$Format:%H$\n"
    assert "sub" not in files  # a submodule is not a file of the workspace
    assert set(files) == set(BUGGY) | {".gitattributes", ".gitmodules", "SUBST"}


@pytest.mark.django_db
def test_a_branch_name_resolves_through_the_copied_refs(tmp_path, write_jsonl):
    markers = tmp_path / "markers"
    root = tmp_path / "calc"
    hostile_repository(root, BUGGY, markers)
    path = write_jsonl([row("HEAD")], "swe.jsonl")
    run(path, root)
    assert TaskVersion.objects.get().workspace.files()["calc/ops.py"] == BUGGY["calc/ops.py"]
    assert markers_left(markers) == []
