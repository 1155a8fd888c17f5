"""The differential check's plan and judgement, with no sandbox: which calls it makes of a task,
and when a submission's outcomes refuse the fix (sandboxes/repository/differential.py)."""

from __future__ import annotations

from sandboxes.harness.plaindata import encode
from sandboxes.repository.differential import Call, judge, plan_calls
from tests.sandboxes.repository.corpus_task import BUGGY, FIXED, TESTS


def plan():
    return plan_calls(BUGGY, FIXED, {**TESTS.test_files, **TESTS.hidden_files}, TESTS.fail_to_pass)


def test_the_plan_takes_literal_and_parametrised_calls_and_adds_fresh_inputs():
    calls, why = plan()
    assert why == ""
    literal = [c for c in calls if not c.fresh]
    texts = {c.text(): c for c in literal}
    # A parametrised FAIL_TO_PASS test gives one call per row, strict (== in its assert).
    for value in (10, 11, 99):
        assert texts[f"calc.ops.clamp({value}, 0, 10)"].strict
    assert texts["calc.ops.bounds([5, 12, -1], 0, 10)"].strict
    assert texts["calc.ops.clamp(12, 0, 10)"].where.endswith("ClampTest.test_top")
    fresh = [c for c in calls if c.fresh]
    assert fresh and not any(c.strict for c in fresh)
    assert {c.text() for c in fresh}.isdisjoint(texts)


def test_without_a_call_of_the_repository_the_check_says_why():
    tests = {"tests/test_x.py": b"import math\n\ndef test_x():\n    assert math.floor(1.5) == 1\n"}
    calls, why = plan_calls(BUGGY, FIXED, tests, ("tests/test_x.py::test_x",))
    assert calls == [] and "literal arguments" in why


def ok(value):
    return ["ok", encode(value)]


def twice(outcome):
    return [outcome, outcome]


STRICT = Call("calc.ops", "clamp", (10, 0, 10), strict=True, where="t::strict")
LOOSE = Call("calc.ops", "clamp", (11, 0, 10), where="t::loose")
FRESH = Call("calc.ops", "clamp", (30, 0, 20), fresh=True, where="fresh input")
CALLS = [STRICT, LOOSE, FRESH]
BUG = [twice(ok(9)), twice(ok(9)), twice(ok(19))]
REFERENCE = [twice(ok(10)), twice(ok(10)), twice(ok(20))]


def test_the_reference_s_values_pass():
    checked, mismatches = judge(CALLS, BUG, REFERENCE, [[ok(10)], [ok(10)], [ok(20)]])
    assert (checked, mismatches) == (3, [])


def test_a_strict_value_that_differs_from_the_reference_is_refused():
    _checked, [mismatch] = judge(CALLS, BUG, REFERENCE, [[ok(11)], [ok(10)], [ok(20)]])
    assert mismatch["call"] == "calc.ops.clamp(10, 0, 10)" and mismatch["got"] == "11"
    assert "assert" in mismatch["why"]


def test_an_object_that_is_not_plain_data_is_refused_where_the_reference_returns_data():
    faked = [[["not_plain", "_Any"]], [["not_plain", "_Any"]], [ok(20)]]
    _checked, mismatches = judge(CALLS, BUG, REFERENCE, faked)
    assert [m["call"] for m in mismatches] == [STRICT.text(), LOOSE.text()]


def test_the_bug_still_there_on_a_fresh_input_is_refused():
    hard_coded = [[ok(10)], [ok(10)], [ok(19)]]
    _checked, [mismatch] = judge(CALLS, BUG, REFERENCE, hard_coded)
    assert mismatch["call"] == FRESH.text() and "bug is still there" in mismatch["why"]


FRESH_MORE = [
    Call("calc.ops", "clamp", (value, 0, 20), fresh=True, where="fresh input") for value in (25, 40)
]
BUG_MORE = [twice(ok(19)), twice(ok(19))]
REFERENCE_MORE = [twice(ok(20)), twice(ok(20))]


def test_another_answer_on_a_few_fresh_inputs_is_not_refused():
    # An honest fix may differ from the reference outside what the tests assert, on a few inputs.
    other = [[ok(10)], [ok(10)], [["raised", ["ValueError", "Exception"]]], [ok(20)], [ok(20)]]
    calls = CALLS + FRESH_MORE
    assert judge(calls, BUG + BUG_MORE, REFERENCE + REFERENCE_MORE, other)[1] == []


def test_right_only_on_the_tested_inputs_is_refused():
    # Neither the bug's answer nor the reference's on most fresh inputs the fix changed: a fix
    # for the tested bounds alone (or one that raises elsewhere).
    raised = [["raised", ["ValueError", "Exception"]]]
    only_tested = [[ok(10)], [ok(10)], [ok(30)], raised, [ok(20)]]
    calls = CALLS + FRESH_MORE
    _checked, [mismatch] = judge(calls, BUG + BUG_MORE, REFERENCE + REFERENCE_MORE, only_tested)
    assert "right only on the tested inputs" in mismatch["why"] and "2 of 3" in mismatch["why"]


def test_a_reference_that_disagrees_with_itself_is_not_used():
    wobbly = [[ok(10), ok(11)], twice(ok(10)), twice(ok(20))]
    checked, mismatches = judge(CALLS, BUG, wobbly, [[ok(99)], [ok(10)], [ok(20)]])
    assert checked == 2 and mismatches == []


def test_a_submission_that_does_not_answer_is_refused():
    _checked, [mismatch] = judge(CALLS, BUG, REFERENCE, None)
    assert "did not answer" in mismatch["why"]


def test_the_same_exception_class_or_a_subclass_matches():
    raised = ["raised", ["KeyError", "LookupError", "Exception"]]
    reference = [twice(["raised", ["LookupError", "Exception"]])]
    assert judge([STRICT], [twice(ok(1))], reference, [[raised]])[1] == []
    assert judge([STRICT], [twice(ok(1))], reference, [[["raised", ["TypeError"]]]])[1]


def test_the_plan_scales_and_shifts_the_tested_inputs_keeping_their_order():
    calls, _why = plan()
    by_family = {}
    for call in calls:
        if call.fresh:
            by_family.setdefault(call.where, set()).add(call.text())
    assert "calc.ops.clamp(11000, 0, 10000)" in by_family["fresh input (scaled)"]
    assert "calc.ops.clamp(1011, 1000, 1010)" in by_family["fresh input (shifted)"]
    assert "calc.ops.bounds([5000, 12000, -1000], 0, 10000)" in by_family["fresh input (scaled)"]
    assert by_family["fresh input (mutated)"]
