"""Bugs injected into a project's sources: SWE-smith's kinds and the mutation engine's
operators, each a minimal text edit of one function that parses, seeded and reproducible."""

import ast
import difflib

from tasks_library.generators.bugs import KINDS, candidates, names_in_tests, sample

MODULE = '''"""Shapes."""

LIMIT = 10  # a module constant: not a function, never changed


def area(width, height):
    """The area; `if` in this docstring is text, not code."""
    if width < 0 or height < 0:
        raise ValueError("negative")  # keep this comment
    result = width * height
    return result


def scaled(values, factor):
    out = []
    for value in values[1:]:
        if value is None:
            return out
        out.append(divide(value, factor))
    return out


def divide(a, b):
    return a - b if b == 0 else a / b


def untested(x):
    return x + 1
'''


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_every_kind_is_injected_as_a_small_edit_that_parses():
    bugs = list(sample({"shapes.py": MODULE}, seed=3))
    assert {bug.kind for bug in bugs} == set(KINDS)
    for bug in bugs:
        ast.parse(bug.buggy)
        assert bug.buggy != MODULE
        changed = _changed_lines(MODULE, bug.buggy)
        assert 1 <= len(changed) <= 4, (bug.description, changed)
        assert '"""The area; `if` in this docstring is text, not code."""' in bug.buggy
        assert "# keep this comment" in bug.buggy or bug.kind in (
            "drop_statement",
            "invert_condition",
        )
        assert "LIMIT = 10  # a module constant" in bug.buggy  # only functions change
        assert bug.function in ("area", "scaled", "divide", "untested")


def test_the_swe_smith_kinds_do_what_they_say():
    bugs = {bug.description: bug for bug in sample({"shapes.py": MODULE}, seed=0)}
    inverted = next(b for d, b in bugs.items() if "condition `value is None` inverted" in d)
    assert "if not (value is None):" in inverted.buggy
    dropped = next(b for d, b in bugs.items() if "`out.append(divide(value, factor))` removed" in d)
    assert "out.append" not in dropped.buggy
    swapped = next(b for d, b in bugs.items() if "`value` and `factor` swapped" in d)
    assert "divide(factor, value)" in swapped.buggy
    early = next(b for d, b in bugs.items() if b.kind == "remove_return")
    assert "        return out\n" not in early.buggy and early.function == "scaled"


def test_only_functions_the_tests_mention_are_targets():
    covered = names_in_tests(["from shapes import area, scaled\n\ndef test_area(): ..."])
    functions = {c.function for c in candidates("shapes.py", MODULE, covered=covered)}
    assert functions == {"area", "scaled"}


def test_the_order_is_seeded():
    first = [b.buggy for b in sample({"shapes.py": MODULE}, seed=1)]
    again = [b.buggy for b in sample({"shapes.py": MODULE}, seed=1)]
    other = [b.buggy for b in sample({"shapes.py": MODULE}, seed=2)]
    assert first == again
    assert first != other and sorted(first) == sorted(other)


def test_precedence_is_kept_where_an_edit_needs_parentheses():
    source = "def f(a, b, c):\n    return a * (b - c) - -c\n"
    for bug in sample({"f.py": source}, seed=0):
        module = ast.parse(bug.buggy)
        assert isinstance(module.body[0], ast.FunctionDef)
    swapped = [b for b in sample({"f.py": source}, seed=0) if b.kind == "swap_arguments"]
    assert any("(c - b)" in b.buggy for b in swapped)
