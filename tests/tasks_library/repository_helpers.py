"""A small real repository (a package and its pytest suite) with one injected bug, as the
repository-task tests use it: the buggy tree, the fixed tree, the ids each list holds."""

from __future__ import annotations

from sandboxes.repository.patches import make_patch
from tasks_library.repositories import DEFAULT_ENVIRONMENT, RepositoryTaskRecord

FIXED = {
    "README.md": b"# calc\nSmall arithmetic helpers.\n",
    "calc/__init__.py": b"from calc.ops import add, clamp, mean\n",
    "calc/ops.py": (
        b"def add(a, b):\n    return a + b\n\n\n"
        b"def clamp(x, low, high):\n    return max(low, min(x, high))\n\n\n"
        b"def mean(values):\n    return sum(values) / len(values)\n"
    ),
    "tests/test_ops.py": (
        b"from calc import add, clamp, mean\n\n\n"
        b"def test_add():\n    assert add(2, 3) == 5\n\n\n"
        b"def test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
        b"def test_clamp_above():\n    assert clamp(50, 0, 10) == 10\n\n\n"
        b"def test_mean():\n    assert mean([1, 2, 3]) == 2\n"
    ),
}
# The bug: clamp forgets its upper bound.
BUGGY = {
    **FIXED,
    "calc/ops.py": FIXED["calc/ops.py"].replace(b"min(x, high)", b"x"),
}
FAIL_TO_PASS = ["tests/test_ops.py::test_clamp_above"]
PASS_TO_PASS = [
    "tests/test_ops.py::test_add",
    "tests/test_ops.py::test_clamp_inside",
    "tests/test_ops.py::test_mean",
]
HIDDEN = {
    "tests/test_hidden.py": (
        b"from calc import clamp\n\n\ndef test_clamp_at_bound():\n"
        b"    assert clamp(11, 0, 10) == 10\n"
    )
}


def record(task_id: str = "calc/clamp-1", **changes) -> RepositoryTaskRecord:
    """A repository task record of the calc bug; ``changes`` replace its fields."""
    fields = dict(
        task_id=task_id,
        problem_statement="clamp(50, 0, 10) returns 50; it should never exceed its upper bound.",
        files=dict(BUGGY),
        reference_patch=make_patch(BUGGY, FIXED),
        fail_to_pass=list(FAIL_TO_PASS),
        pass_to_pass=list(PASS_TO_PASS),
        environment=dict(DEFAULT_ENVIRONMENT),
        source="test-repo",
        licence="MIT",
        metadata={"package": "calc", "bug": "clamp upper bound dropped"},
    )
    fields.update(changes)
    return RepositoryTaskRecord(**fields)
