"""The validation pipeline on hand-made tasks, one per finding: evidence stored, quarantine
applied."""

import pytest

from tasks_library.models import TaskVersion
from tasks_library.services import task_versions_approve, task_versions_quarantine, tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate

PROMPT = 'def inc(x):\n    """Add one.\n    >>> inc(1)\n    2\n    """\n'
STRONG = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-5) == -4\n"
    "    assert candidate(0) == 1\n    assert candidate(41) == 42\n"
)


def _record(task_id: str, **overrides) -> dict:
    record = {
        "task_id": task_id,
        "prompt": PROMPT,
        "entry_point": "inc",
        "reference_solution": "    return x + 1\n",
        "tests": STRONG,
        "where": f"test:{task_id}",
    }
    record.update(overrides)
    return record


CASES = {
    "valid": _record("valid"),
    "broken": _record("broken", reference_solution="    return x + 2\n"),
    "flaky": _record(
        "flaky",
        reference_solution="    import os\n    return x + 1 if os.urandom(1)[0] < 128 else x\n",
    ),
    "trivial": _record(
        "trivial", tests="def check(candidate):\n    assert candidate(1) is None or True\n"
    ),
    "contradicts": _record("contradicts", prompt=PROMPT.replace("    2\n", "    3\n")),
    "weak": _record("weak", tests="def check(candidate):\n    assert candidate(1) is not None\n"),
    "js": _record(
        "js",
        prompt="/* Add one.\n>>> inc(1)\n2\n*/\nconst inc = (x) => {\n",
        reference_solution="  return x + 1;\n}\n",
        tests=(
            "const testInc = () => {\n  console.assert(inc(1) === 2)\n"
            "  console.assert(inc(-5) === -4)\n"
            "  console.assert(inc(10) === 11)\n}\ntestInc()\n"
        ),
        harness="js-console-assert",
    ),
}


@pytest.fixture
def validated():
    tasks_import(source="test", task_set_name="cases", records=list(CASES.values()))
    versions = list(TaskVersion.objects.select_related("task", "test_suite"))
    task_versions_validate(
        versions=versions, options=Options(reference_runs=12, mutants=20, weak_threshold=0.6)
    )
    return {v.task.task_id: TaskVersion.objects.get(pk=v.pk) for v in versions}


@pytest.mark.django_db
def test_each_finding_gets_its_verdict_and_evidence(validated):
    verdicts = {name: v.verdict for name, v in validated.items()}
    assert verdicts == {
        "valid": "valid",
        "broken": "broken_reference",
        "flaky": "flaky",
        "trivial": "trivial_passes",
        "contradicts": "prompt_contradicts",
        "weak": "weak_suite",
        "js": "valid",
    }
    valid = validated["valid"]
    assert (
        valid.report["reference"]["passed_runs"] == 12
        and valid.report["trivial"]["tests_passed"] == 0
    )
    assert valid.report["examples"] == {"count": 1, "status": "ok", "contradicting": []}
    assert valid.mutation_score >= 0.6 and valid.report["mutation"]["killed"] > 0
    assert valid.report["mutation"]["mutants"] == valid.report["mutation"]["killed"] + len(
        valid.report["mutation"]["survivors"]
    )

    assert validated["broken"].report["reference"]["failing"][0]["test"] == "assert_0"
    assert validated["flaky"].report["reference"]["disagreeing_tests"]
    contradicting = validated["contradicts"].report["examples"]["contradicting"]
    assert contradicting[0]["line"] == 3 and "inc(1)" in contradicting[0]["example"]
    weak = validated["weak"]
    assert weak.mutation_score < 0.6 and weak.report["mutation"]["survivors"][0]["description"]
    assert "mutation score" in weak.verdict_reasons[0]
    js = validated["js"]
    assert js.report["examples"]["count"] == 1 and js.report["mutation"]["mutants"] > 0


@pytest.mark.django_db
def test_broken_flaky_and_contradicting_versions_are_quarantined(validated):
    quarantined = {name for name, v in validated.items() if v.quarantined}
    assert quarantined == {"broken", "flaky", "trivial", "contradicts"}
    assert validated["flaky"].quarantine_reason == "automatic: flaky"
    assert not validated["weak"].quarantined  # weak suites are flagged, still trainable


@pytest.mark.django_db
def test_a_curators_override_survives_revalidation(validated):
    broken = validated["broken"]
    task_versions_approve(
        version_ids=[broken.pk],
        author="grace",
        reason="reference is right; tests will be fixed in v2",
    )
    task_versions_validate(versions=[broken], options=Options(reference_runs=1, mutants=0))
    broken.refresh_from_db()
    assert broken.verdict == "broken_reference" and not broken.quarantined
    assert broken.override_reason.startswith("reference is right")


def test_impossible_options_are_refused():
    with pytest.raises(ValueError, match="reference_runs must be from 1 to 50, got 0"):
        task_versions_validate(versions=[], options=Options(reference_runs=0))


@pytest.mark.django_db
def test_a_curators_quarantine_survives_revalidation_with_its_reason(validated):
    valid = validated["valid"]
    task_versions_quarantine(
        version_ids=[valid.pk], author="heidi", reason="prompt is ambiguous about negatives"
    )
    task_versions_validate(versions=[valid], options=Options(reference_runs=1, mutants=0))
    valid.refresh_from_db()
    assert valid.verdict == "valid" and valid.quarantined
    assert valid.quarantine_reason == "prompt is ambiguous about negatives"
