"""EvalPlus-style generated tests: seeds from the suite, type-aware mutation, the reference as
oracle."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from sandboxes.grading import expected_test_ids
from sandboxes.queue import python_tests, run_many
from tasks_library.models import TaskVersion
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tasks_library.validation.testgen import (
    assertion,
    extend_check,
    mutate_inputs,
    seed_inputs,
    task_versions_generate_tests,
)

TESTS = """

METADATA = {}


def check(candidate):
    assert candidate(2, 3) == 5   # the only example
    xs = [1, 2]
    assert candidate(*xs) == 3
    assert candidate(10, -4) == 6
"""


def test_seeds_are_the_literal_calls_and_mutants_keep_their_types():
    seeds = seed_inputs(TESTS, "add")
    assert seeds == [(2, 3), (10, -4)]  # candidate(*xs) is not literal
    mutants = mutate_inputs(seeds, count=15, seed=1)
    assert len(mutants) == 15 and len(set(mutants)) == 15
    assert not set(mutants) & set(seeds)
    assert all(len(m) == 2 and all(type(v) is int for v in m) for m in mutants)
    assert mutate_inputs(seeds, count=15, seed=1) == mutants
    mixed = mutate_inputs([(["a", "bc"], 2.5, True)], count=10, seed=4)
    assert all(
        isinstance(m[0], list) and isinstance(m[1], float) and isinstance(m[2], bool) for m in mixed
    )


def test_extended_check_keeps_the_text_and_adds_counted_tests():
    statements = [
        assertion((1, 1), "2"),
        assertion((0.1, 0.2), "0.30000000000000004"),
        assertion((1, 2), "<object>"),
    ]
    assert statements[0] == "assert candidate(1, 1) == 2"
    assert statements[1].startswith("assert abs(candidate(0.1, 0.2) - 0.30000000000000004) <= 1e-6")
    assert statements[2] is None  # not a literal: no test
    extended = extend_check(TESTS, statements[:2])
    assert extended.startswith(TESTS.rstrip("\n")) and "# the only example" in extended
    assert len(expected_test_ids(extended)) == len(expected_test_ids(TESTS)) + 2


def _task(task_id, reference, tests=TESTS):
    return {
        "task_id": task_id,
        "prompt": "def add(a, b):\n",
        "entry_point": "add",
        "reference_solution": reference,
        "tests": tests,
        "where": task_id,
    }


@pytest.mark.django_db
def test_generated_tests_catch_a_hard_coded_answer_that_the_thin_suite_passes():
    thin = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
    tasks_import(
        source="t",
        task_set_name="thin",
        records=[
            _task("add", "    return a + b\n", thin),
            _task(
                "picky",
                "    if a < 0:\n        raise ValueError('a must be >= 0')\n    return a + b\n",
                thin,
            ),
            _task("slow", "    while a < 0:\n        pass\n    return a + b\n", thin),
        ],
    )
    versions = list(
        TaskVersion.objects.select_related("task", "test_suite").order_by("task__task_id")
    )
    generated = {
        g.version.task.task_id: g
        for g in task_versions_generate_tests(versions=versions, count=12, seed=2)
    }
    add = generated["add"]
    assert add.new_version is not None and add.new_version.parent == add.version
    assert add.tests_before == 1 and add.tests_after == 1 + add.kept and add.kept >= 8
    assert "generated tests: +" in add.new_version.change_note
    # The reference is the oracle: where it raises, there is no test.
    picky = generated["picky"]
    assert picky.kept < picky.candidates
    assert "candidate(-" not in picky.new_version.test_suite.hidden_tests
    # An input on which the reference hangs is dropped (a 1 s limit per probe call), not the whole
    # probe.
    slow = generated["slow"]
    assert slow.new_version is not None and slow.kept == picky.kept < slow.candidates
    assert "candidate(-" not in slow.new_version.test_suite.hidden_tests

    hard_coded = "def add(a, b):\n    return 5\n"
    old, new = run_many(
        [
            python_tests(hard_coded, add.version.test_suite.hidden_tests, "add"),
            python_tests(hard_coded, add.new_version.test_suite.hidden_tests, "add"),
        ]
    )
    assert old.passed and not new.passed
    again = task_versions_generate_tests(versions=[add.version], count=12, seed=2)[0]
    assert again.new_version is None and "nothing changed" in again.note


@pytest.mark.django_db
def test_validate_tasks_generates_validates_and_repins(humaneval, write_jsonl):
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[:6])),
        "--taskset",
        "six",
        stdout=StringIO(),
    )
    out = StringIO()
    call_command(
        "validate_tasks",
        "--taskset",
        "six",
        "--reference-runs",
        "2",
        "--mutants",
        "10",
        "--generate-tests",
        "10",
        "--json",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    made = [g for g in report["generated"] if g["new_version"]]
    assert len(made) >= 4
    for g in made:
        assert g["tests_after"] > g["tests_before"] and g["new_verdict"] in (
            "valid",
            "weak_suite",
            "prompt_contradicts",
        )
        assert g["mutation_score_after"] >= g["mutation_score_before"]
    pinned = {v.task.task_id: v for v in task_set_versions(task_set=task_set_get(name="six"))}
    for g in made:
        assert pinned[g["task_id"]].version == g["new_version"]
    assert task_set_get(name="six").versions.count() == 2
