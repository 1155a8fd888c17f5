"""Comparisons that cannot be faked (sandboxes/harness/grading_checks.py), with no sandbox: which
values the guard refuses, and which operands of a test's asserts it wraps."""

from __future__ import annotations

import ast
import decimal
import functools
import operator
from unittest import mock

import pytest

from sandboxes.harness.grading_checks import GUARD_NAME, GuardOperands, checked, fake_equality


class AnyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class IntsOnly(int):
    def __eq__(self, other):
        return isinstance(other, int)

    __hash__ = int.__hash__


class IsNot(int):
    __eq__ = functools.partialmethod(operator.is_not)
    __hash__ = int.__hash__


class NeverDifferent:
    def __ne__(self, other):
        return False


class HoldsAll:
    def __contains__(self, item):
        return True


class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x

    __hash__ = None


@pytest.mark.parametrize(
    "value",
    [AnyInt(3), IntsOnly(3), IsNot(3), NeverDifferent(), HoldsAll(), mock.ANY, [1, [AnyInt(2)]]],
    ids=["always", "ints-only", "builtin-eq", "never-different", "holds-all", "mock-any", "nested"],
)
def test_a_value_that_fakes_comparisons_is_refused(value):
    assert fake_equality(value)
    with pytest.raises(AssertionError, match="fakes comparisons"):
        checked(value)


@pytest.mark.parametrize(
    "value",
    [3, "x", 2.5, None, (1, [2, {"a": b"b"}]), {1, 2}, Point(1), decimal.Decimal("1.5"), True],
)
def test_honest_values_pass_unchanged(value):
    assert fake_equality(value) == ""
    assert checked(value) is value


def wrapped(source: str) -> str:
    tree = GuardOperands().visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree))


def test_computed_operands_are_wrapped_and_the_test_s_own_constants_are_not():
    source = (
        "from unittest.mock import ANY\n"
        "from calc import clamp\n"
        "EXPECTED = {'id': ANY, 'n': 3}\n"
        "def test_x(value):\n"
        "    local = [1, ANY]\n"
        "    result = clamp(value)\n"
        "    assert clamp(1) == 3\n"
        "    assert result == EXPECTED\n"
        "    assert result == local\n"
        "    assert {'id': ANY, 'got': result} == value\n"
    )
    out = wrapped(source)
    assert f"{GUARD_NAME}(clamp(1)) == 3" in out
    assert f"{GUARD_NAME}(result) == EXPECTED" in out
    assert f"{GUARD_NAME}(result) == local" in out
    # A literal's items: ANY stays a literal, the computed item is wrapped.
    assert f"{{'id': ANY, 'got': {GUARD_NAME}(result)}} == {GUARD_NAME}(value)" in out
