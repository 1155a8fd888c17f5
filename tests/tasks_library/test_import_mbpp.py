"""MBPP's shape (integer ids, assert lists, setup code, challenge tests, no entry point)
imports with no preprocessing, keeps the dataset's ids, grades per assert and validates in
the real sandbox. The fixture holds 13 original problems in that shape, awkward ones among
them (several functions in a reference, setup code building trees, a helper class the tests
use, names the reference imports, a Counter compared with a dict, a builtin class as an
argument, multi-line asserts, the sanitized variant's field names)."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandboxes import result as R
from tasks_library.importers.crucible import export_record
from tasks_library.models import Task, TaskSet, TaskVersion, TestSuiteVersion
from tests.tasks_library.shape_helpers import grade, import_json, validate_rows, versions

FIXTURE = Path(__file__).parent / "data" / "mbpp_shaped.jsonl"
ENTRY_POINTS = {
    "MBPP/1": "strip_ends",
    "MBPP/2": "count_primes",  # the reference also defines is_prime, which no test calls
    "MBPP/3": "to_roman",  # the asserts call to_roman first, then from_roman
    "MBPP/4": "tree_height",
    "MBPP/5": "leaf_sum",
    "MBPP/6": "word_counts",
    "MBPP/7": "group_by_initial",
    "MBPP/8": "all_of_type",
    "MBPP/9": "longest_chain",
    "MBPP/10": "smallest_at",
    "MBPP/11": "circle_area",
    "MBPP/12": "fib",
    "MBPP/13": "mean_and_median",
}


def rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


@pytest.mark.django_db
def test_rows_import_with_the_dataset_ids_and_derived_entry_points():
    report = import_json("mbpp", str(FIXTURE))
    assert report == {
        "task_set": "mbpp_shaped",
        "imported": 13,
        "new_versions": 13,
        "unchanged": 0,
        "shape": "mbpp",
    }
    found = versions()
    assert {tid: v.entry_point for tid, v in found.items()} == ENTRY_POINTS
    pinned = TaskSet.objects.get(name="mbpp_shaped").members.values_list(
        "task_version__task__task_id", flat=True
    )
    assert list(pinned) == [f"MBPP/{row['task_id']}" for row in rows()]
    assert all(
        v.task.source == "mbpp" and v.test_suite.harness == "python-check" for v in found.values()
    )
    # One test id per assert, challenge tests after the test list; visible: the first two.
    count_primes = found["MBPP/2"].test_suite
    assert count_primes.hidden_test_ids == [f"assert_{k}" for k in range(5)]
    assert count_primes.visible_test_ids == ["assert_0", "assert_1"]
    assert "count_primes(1000) == 168" in count_primes.hidden_tests
    # The prompt is a docstring with the text and the first assert; the program is
    # prompt + completion, so the reference alone is the completion.
    tree = found["MBPP/4"]
    assert tree.prompt.startswith('"""Write a function to find the height of a binary tree')
    assert "assert tree_height(root) == 3" in tree.prompt
    assert tree.reference_solution == rows()[3]["code"] + "\n"


@pytest.mark.django_db
def test_setup_code_holds_the_rows_setup_and_the_names_its_tests_need_from_the_reference():
    import_json("mbpp", str(FIXTURE))
    setup = {tid: v.test_suite.setup_code for tid, v in versions().items()}
    # The reference's class (the row's setup builds trees of it), then the row's setup.
    assert setup["MBPP/4"].startswith("class Node:\n    def __init__(self, data):\n")
    assert "root.left.left = Node(4)" in setup["MBPP/4"]
    assert setup["MBPP/5"].startswith("class Tree:")  # the row's own setup code
    assert setup["MBPP/9"].startswith("class Pair(object):")  # the helper class the tests use
    assert setup["MBPP/10"] == "import sys\n" and setup["MBPP/11"] == "import math\n"
    assert setup["MBPP/13"] == "from fractions import Fraction\n"  # test_imports
    # Functions and constants no test uses stay the program's business.
    assert setup["MBPP/2"] == "" and setup["MBPP/3"] == ""
    assert "NUMERALS" not in setup["MBPP/3"]


@pytest.mark.django_db
def test_format_jsonl_detects_the_shape_and_finds_the_same_versions():
    first = import_json("mbpp", str(FIXTURE), "--taskset", "explicit")
    detected = import_json("--format", "jsonl", str(FIXTURE), "--taskset", "detected")
    assert first["new_versions"] == 13
    assert detected["shape"] == "mbpp" and detected["unchanged"] == 13
    assert detected["new_versions"] == 0
    assert TaskVersion.objects.count() == 13


@pytest.mark.django_db
def test_rows_validate_in_the_sandbox():
    import_json("mbpp", str(FIXTURE))
    verdicts = validate_rows("mbpp_shaped", "--reference-runs", "2", "--mutants", "8")
    assert {tid: row["verdict"] for tid, row in verdicts.items()} == dict.fromkeys(
        ENTRY_POINTS, "valid"
    ), {tid: row["reasons"] for tid, row in verdicts.items() if row["verdict"] != "valid"}
    for row in verdicts.values():
        assert row["report"]["reference"]["passed_runs"] == 2
        assert row["report"]["trivial"]["tests_passed"] == 0
        assert row["report"]["mutation"]["mutants"] > 0


@pytest.mark.django_db
def test_graded_per_assert_and_a_program_with_its_own_classes_passes():
    import_json("mbpp", str(FIXTURE))
    found = versions()
    # A model's own tree class (other names, other fields): the tests' trees are rebuilt
    # with the task's class in its sandbox, and its function reads them.
    own_tree = (
        "class TreeNode:\n    def __init__(self, v):\n        self.v = v\n"
        "def tree_height(node):\n    if node is None:\n        return 0\n"
        "    return 1 + max(tree_height(node.left), tree_height(node.right))\n"
    )
    assert grade(found["MBPP/4"], own_tree).status == R.OK
    # Per assert: removing every occurrence is wrong on the first only.
    wrong = "def strip_ends(s, ch):\n    return s.replace(ch, '')\n"
    result = grade(found["MBPP/1"], wrong)
    assert result.status == R.FAILED
    assert [t.passed for t in result.tests] == [False, True, True, True]
    # from_roman is the program's: a program without it fails those asserts only.
    half = "def to_roman(n):\n    return 'IV' if n == 4 else 'MCMXCIV'\n"
    result = grade(found["MBPP/3"], half)
    assert [t.passed for t in result.tests] == [True, True, False, False]


@pytest.mark.django_db
def test_setup_code_round_trips_through_the_crucible_format(tmp_path):
    import_json("mbpp", str(FIXTURE))
    version = TaskVersion.objects.get(task__task_id="MBPP/9")
    line = export_record(version)
    assert line["test_suite"]["setup_code"].startswith("class Pair(object):")
    path = tmp_path / "exported.jsonl"
    path.write_text(json.dumps(line) + "\n")
    TaskSet.objects.all().delete()
    TaskVersion.objects.all().delete()
    Task.objects.all().delete()
    TestSuiteVersion.objects.all().delete()
    import_json("--format", "crucible", str(path))
    again = TaskVersion.objects.get(task__task_id="MBPP/9")
    assert again.content_hash == version.content_hash
    assert again.test_suite.setup_code == version.test_suite.setup_code


BAD_ROWS = [
    ({"task_id": True}, "field 'task_id'", "task_id"),
    ({"task_id": -3}, "field 'task_id'", "task_id"),
    ({"text": 7}, "field 'text' must be a non-empty string", "text"),
    ({"code": "def f(:\n"}, "field 'code': does not parse", "code"),
    (
        {"test_list": "assert f(1) == 1"},
        "field 'test_list': expected a non-empty list",
        "test_list",
    ),
    ({"test_list": []}, "field 'test_list': expected a non-empty list", "test_list"),
    ({"test_list": ["assert f(1) =="]}, "field 'test_list[0]': does not parse", "test_list[0]"),
    (
        {"test_list": ["assert g(1) == 1"]},
        "the asserts call no function the reference",
        "test_list",
    ),
    ({"test_setup_code": ["x = 1"]}, "field 'test_setup_code': must be a string", None),
    ({"test_setup_code": "x = ("}, "field 'test_setup_code': does not parse", None),
    ({"challenge_test_list": [3]}, "field 'challenge_test_list[0]'", None),
    ({"test_imports": "import os"}, "field 'test_imports'", None),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "message", "_field"), BAD_ROWS)
def test_a_bad_row_names_file_line_and_field_and_nothing_is_written(
    write_jsonl, change, message, _field
):
    good = {
        "task_id": 1,
        "text": "Return x.",
        "code": "def f(x):\n    return x\n",
        "test_list": ["assert f(1) == 1", "assert f(2) == 2"],
    }
    path = write_jsonl([good, {**good, "task_id": 2, **change}], "bad.jsonl")
    with pytest.raises(CommandError) as caught:
        call_command("import_tasks", "mbpp", str(path), stdout=StringIO())
    assert f"{path}:2: " in str(caught.value) and message in str(caught.value)
    assert "nothing was written" in str(caught.value)
    assert Task.objects.count() == 0 and TaskVersion.objects.count() == 0


@pytest.mark.django_db
def test_missing_file_and_missing_path_are_clear_errors(tmp_path):
    with pytest.raises(CommandError, match="name the file to read: import_tasks mbpp FILE"):
        call_command("import_tasks", "mbpp", stdout=StringIO())
    with pytest.raises(CommandError, match="is not a file"):
        call_command("import_tasks", "mbpp", str(tmp_path / "none.jsonl"), stdout=StringIO())
