"""Unified diffs between file trees (sandboxes/repository/patches.py): made and applied with git."""

import pytest

from sandboxes.repository.patches import PatchError, apply_patch, make_patch, patched_paths

BEFORE = {
    "pkg/a.py": b"x = 1\ny = 2\n",
    "pkg/gone.py": b"old\n",
    "data.bin": b"\x00\x01",
    "tail.py": b"no newline",
}
AFTER = {
    "pkg/a.py": b"x = 1\ny = 3\n",
    "pkg/new.py": b"new\n",
    "data.bin": b"\x00\x02\xff",
    "tail.py": b"no newline!",
}


def test_a_patch_turns_before_into_after_including_added_deleted_binary_and_no_eol():
    patch = make_patch(BEFORE, AFTER)
    assert "diff --git a/pkg/a.py b/pkg/a.py" in patch
    assert "+++ /dev/null" in patch and "--- /dev/null" in patch
    assert "GIT binary patch" in patch
    assert apply_patch(BEFORE, patch) == AFTER
    assert patched_paths(patch) == ["data.bin", "pkg/a.py", "pkg/gone.py", "pkg/new.py", "tail.py"]


def test_identical_trees_give_an_empty_patch_that_applies_as_a_copy():
    assert make_patch(BEFORE, dict(BEFORE)) == ""
    copy = apply_patch(BEFORE, "")
    assert copy == BEFORE and copy is not BEFORE


def test_text_and_bytes_are_the_same_content():
    assert make_patch({"a.py": "x\n"}, {"a.py": b"x\n"}) == ""


def test_a_patch_that_does_not_apply_names_the_file_and_changes_nothing():
    patch = make_patch(BEFORE, AFTER)
    files = {**BEFORE, "pkg/a.py": b"x = 1\ny = 5\n"}
    with pytest.raises(PatchError, match="pkg/a.py"):
        apply_patch(files, patch)
    assert files["pkg/a.py"] == b"x = 1\ny = 5\n"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("not a diff at all", "not a unified diff"),
        ("diff --git a/../etc/passwd b/../etc/passwd\n", "'..'"),
        ("diff --git a//abs b//abs\n", "workspace path"),
    ],
)
def test_unreadable_patches_and_paths_outside_the_workspace_are_refused(patch, message):
    with pytest.raises(PatchError, match=message):
        apply_patch(BEFORE, patch)


def test_a_patch_that_makes_a_symbolic_link_is_refused():
    link = (
        "diff --git a/leak b/leak\nnew file mode 120000\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/leak\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    with pytest.raises(PatchError, match="symbolic link"):
        apply_patch(BEFORE, link)
