"""The scripted repository demonstration edits like an expert, a region at a time: the
str_replace edits :func:`replacement_edits` derives reproduce the fixed file exactly, each
``old_str`` occurs once where it is applied, and each view_range shows its region."""

import random

import pytest

from training.agents.demonstrations import replacement_edits


def apply(original: str, edits) -> str:
    text = original
    for _view_range, old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new, 1)
    return text


def test_one_changed_line_is_one_small_edit_with_its_view_range():
    original = "".join(f"line {i}\n" for i in range(1, 101))
    fixed = original.replace("line 50\n", "line fifty\n")
    [(view_range, old, new)] = replacement_edits(original, fixed)
    assert old == "line 49\nline 50\nline 51\n" and new == "line 49\nline fifty\nline 51\n"
    assert view_range == [47, 53]
    assert apply(original, [(view_range, old, new)]) == fixed


def test_a_region_that_repeats_elsewhere_widens_until_it_is_unique():
    block = "    if x:\n        return 1\n"
    original = "def f(x):\n" + block + "\n\ndef g(x):\n" + block
    fixed = "def f(x):\n" + block + "\n\ndef g(x):\n    if x:\n        return 2\n"
    [(_range, old, new)] = replacement_edits(original, fixed, context=0)
    assert original.count(old) == 1 and "def g" in old and "return 2" in new
    assert apply(original, [(_range, old, new)]) == fixed


def test_several_regions_apply_in_order_and_give_the_fixed_text():
    rng = random.Random(7)
    made = 0
    for _case in range(200):
        lines = [f"x = {rng.randint(0, 5)}\n" for _ in range(rng.randint(1, 40))]
        changed = list(lines)
        for _edit in range(rng.randint(1, 4)):
            at = rng.randrange(len(changed) + 1)
            action = rng.choice(("insert", "delete", "replace"))
            if action == "insert" or not changed:
                changed.insert(at, f"y = {rng.randint(0, 3)}\n")
            elif action == "delete":
                del changed[min(at, len(changed) - 1)]
            else:
                changed[min(at, len(changed) - 1)] = f"z = {rng.randint(0, 3)}\n"
        original, fixed = "".join(lines), "".join(changed)
        edits = replacement_edits(original, fixed)
        if edits is None:  # allowed (the caller writes the file whole) only when it must be
            assert not original or len(set(lines)) < len(lines)
            continue
        assert apply(original, edits) == fixed
        made += 1
        total = original.count("\n") + 1
        for (first, last), _old, _new in edits:
            assert 1 <= first <= last <= total
    assert made >= 180  # files of few distinct lines are the hard case; most still get edits


@pytest.mark.parametrize(("original", "fixed"), [("", "new\n"), ("a\n", "a\n")])
def test_an_empty_original_needs_a_whole_file_and_no_change_needs_no_edit(original, fixed):
    edits = replacement_edits(original, fixed)
    assert edits is None if not original else edits == []
