"""A tiny repository task the repository-grading tests share: a package with a bug, its visible
tests, a hidden test file, and the fix."""

from __future__ import annotations

from sandboxes.repository import RepositoryTests, is_test_path

BUGGY = {
    "calc/__init__.py": b"from calc.ops import add, clamp, mul\n",
    "calc/ops.py": (
        b"def add(a, b):\n"
        b"    return a + b\n"
        b"\n"
        b"\n"
        b"def mul(a, b):\n"
        b"    return a * b\n"
        b"\n"
        b"\n"
        b"def clamp(value, low, high):\n"
        b"    if value < low:\n"
        b"        return low\n"
        b"    if value >= high:\n"
        b"        return high - 1\n"  # the bug: high is inclusive
        b"    return value\n"
    ),
    "tests/__init__.py": b"",
    "tests/test_ops.py": (
        b"from calc import add, clamp, mul\n"
        b"\n"
        b"\n"
        b"def test_add():\n"
        b"    assert add(2, 3) == 5\n"
        b"\n"
        b"\n"
        b"def test_mul():\n"
        b"    assert mul(4, 5) == 20\n"
        b"\n"
        b"\n"
        b"def test_clamp_inside():\n"
        b"    assert clamp(5, 0, 10) == 5\n"
    ),
    "pyproject.toml": (
        b'[project]\nname = "calc"\nversion = "0.1"\n\n'
        b'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    ),
    "README.md": b"# calc\n",
}
HIDDEN = {
    "tests/test_clamp_bounds.py": (
        b"import pytest\n"
        b"\n"
        b"from calc import clamp\n"
        b"\n"
        b"\n"
        b"@pytest.mark.parametrize('value', [10, 11, 99])\n"
        b"def test_clamp_high(value):\n"
        b"    assert clamp(value, 0, 10) == 10\n"
        b"\n"
        b"\n"
        b"def test_clamp_low():\n"
        b"    assert clamp(-4, 0, 10) == 0\n"
    ),
}
FIX = {"calc/ops.py": BUGGY["calc/ops.py"].replace(b"return high - 1", b"return high")}
FIXED = {**BUGGY, **FIX}
FAIL_TO_PASS = (
    "tests/test_clamp_bounds.py::test_clamp_high[10]",
    "tests/test_clamp_bounds.py::test_clamp_high[11]",
    "tests/test_clamp_bounds.py::test_clamp_high[99]",
)
PASS_TO_PASS = (
    "tests/test_clamp_bounds.py::test_clamp_low",
    "tests/test_ops.py::test_add",
    "tests/test_ops.py::test_mul",
    "tests/test_ops.py::test_clamp_inside",
)
TESTS = RepositoryTests(
    fail_to_pass=FAIL_TO_PASS,
    pass_to_pass=PASS_TO_PASS,
    test_files={p: c for p, c in BUGGY.items() if is_test_path(p)},
    hidden_files=HIDDEN,
    timeout_s=60.0,
)
