"""Validation of repository tasks: does the reference patch resolve the task, every time, and do
the FAIL_TO_PASS and PASS_TO_PASS lists say what the unpatched repository does?

For each version, in fresh sandbox sessions (``sandboxes.repository.grade_repository``, with the
task's test files reset and its hidden files added, exactly as an agent's submission is graded):

1. **reference** - the workspace with the reference patch applied, N times: every id must pass
   every time with the same per-id results. Runs that disagree mark the version ``flaky``
   (the ids that changed are the evidence); a consistent failure marks the reference broken
   (the failing ids and their outcomes are the evidence).
2. **empty patch** - the workspace as the agent receives it: every FAIL_TO_PASS id must fail and
   every PASS_TO_PASS id pass. An unpatched repository that passes every FAIL_TO_PASS id makes
   the task ``trivial_passes`` (it cannot fail); otherwise any id on the wrong side makes the
   lists wrong (``wrong_test_lists``, the ids as evidence).
3. **collection** - an id no run collected (``missing`` in every run) names a test that does not
   exist: it is reported, and it fails the reference.
4. **the differential's coverage** - what the grading's second line will compare on the version
   (the calls of the repository's functions its tests make, and fresh inputs), or why it has
   nothing to compare (methods, values that are not plain data): ``report["differential"]``.

This module judges; :mod:`tasks_library.validation.pipeline` runs it beside the function tasks'
stages and stores the verdicts (quarantining as for function tasks).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sandboxes.repository import RepositoryResult, RepositoryTests, grade_repository
from sandboxes.repository.differential import differential_for
from sandboxes.repository.patches import PatchError, apply_patch
from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_content

EVIDENCE_ITEMS = 10
# Gradings in flight at once: each holds a sandbox session (a worker slot) for a pytest run.
PARALLEL_GRADINGS = 4
PASSED = "passed"
INFRA_ERROR = "infra_error"


@dataclass
class Judgement:
    """What the repository stages found about one version."""

    findings: list[str]
    reasons: list[str]
    report: dict


def repository_versions_judge(
    versions: list[TaskVersion],
    environments: dict[int, dict],
    *,
    reference_runs: int,
) -> dict[int, Judgement]:
    """Run the reference ``reference_runs`` times and the empty patch once per version, all
    gradings of all versions queued together (:data:`PARALLEL_GRADINGS` at a time), then judge.

    Args:
        versions: repository task versions.
        environments: environment id -> the request field of its build (every version's
            environment must be in it).

    Returns:
        version id -> :class:`Judgement`.
    """
    jobs: list[tuple[int, str, dict[str, bytes], dict[str, bytes], RepositoryTests, dict]] = []
    judged: dict[int, Judgement] = {}
    for version in versions:
        content = repository_content(version)
        tests, files, patch = content.tests(), content.files, content.reference_patch
        environment = environments[version.environment_id]
        try:
            fixed = apply_patch(files, patch)
        except PatchError as exc:  # stored patches were checked on import; say so if not
            judged[version.pk] = Judgement(
                [TaskVersion.VERDICT_BROKEN_REFERENCE],
                [f"the reference patch does not apply: {exc}"],
                {"reference": {"runs": 0, "error": str(exc)}},
            )
            continue
        jobs += [(version.pk, "reference", fixed, files, tests, environment)] * reference_runs
        jobs.append((version.pk, "empty_patch", files, files, tests, environment))

    def run(job) -> RepositoryResult:
        _pk, _stage, final, base, tests, environment = job
        queue = environment.get("queue") or "python"
        return grade_repository(final, tests, base=base, environment=environment, runtime=queue)

    with ThreadPoolExecutor(max_workers=PARALLEL_GRADINGS) as pool:
        results = list(pool.map(run, jobs))
    by_version: dict[int, dict[str, list[RepositoryResult]]] = {}
    for (pk, stage, *_rest), result in zip(jobs, results):
        by_version.setdefault(pk, {"reference": [], "empty_patch": []})[stage].append(result)
    for version in versions:
        if version.pk not in judged:
            runs = by_version[version.pk]
            judged[version.pk] = judge(version, runs["reference"], runs["empty_patch"][0])
            judged[version.pk].report["differential"] = differential_coverage(version)
    return judged


def differential_coverage(version: TaskVersion) -> dict:
    """What the grading's second line will compare on this version
    (``sandboxes.repository.differential``): how many calls, of which functions, and, where
    there are none, why (the first line then stands alone for this task)."""
    content = repository_content(version)
    try:
        differential = differential_for(content.files, content.reference_patch, content.tests())
    except (PatchError, ValueError) as exc:
        return {"calls": 0, "not_applicable": f"the reference patch does not apply: {exc}"}
    literal = [c for c in differential.calls if not c.fresh]
    return {
        "calls": len(differential.calls),
        "literal": len(literal),
        "strict": sum(c.strict for c in literal),
        "fresh": len(differential.calls) - len(literal),
        "functions": sorted({f"{c.module}.{c.function}" for c in differential.calls})[:20],
        "not_applicable": differential.not_applicable,
    }


def _not_passed(result: RepositoryResult, ids) -> list[dict]:
    """The ids of ``ids`` that did not pass in ``result``, with their outcome and, where pytest
    gave one, the first line of the failure."""
    found = []
    for test_id in ids:
        status = result.per_id.get(test_id, "missing")
        if status != PASSED:
            found.append({"test": test_id, "status": status})
            if result.messages.get(test_id):
                found[-1]["message"] = result.messages[test_id][:300]
    return found


def judge(version: TaskVersion, runs: list[RepositoryResult], empty: RepositoryResult) -> Judgement:
    """Findings, reasons and the report of one version from its reference runs and its
    empty-patch run (see the module)."""
    suite = version.test_suite
    ids = [*suite.fail_to_pass, *suite.pass_to_pass]
    findings: list[str] = []
    reasons: list[str] = []
    answered = [r for r in runs if r.status != INFRA_ERROR]
    first = answered[0] if answered else runs[0]
    report: dict = {
        "reference": {
            "runs": len(runs),
            "passed_runs": sum(r.resolved for r in runs),
            "statuses": [r.status for r in runs],
            "wall_ms_median": round(sorted(r.wall_ms for r in runs)[len(runs) // 2], 1),
            "per_id": dict(first.per_id),
            "flags": sorted({f for r in runs for f in r.flags}),
        },
        "notes": [],
    }
    report["environment"] = {"ran_in": sorted({r.environment for r in runs if r.environment})}
    if len(answered) < len(runs):
        findings.append(TaskVersion.VERDICT_INFRA_ERROR)
        reasons.append("reference run: " + next(r.detail for r in runs if r.status == INFRA_ERROR))
    outcomes = {tuple(r.per_id.get(i, "missing") for i in ids) for r in answered}
    if len(outcomes) > 1 or len({r.status for r in answered}) > 1:
        disagreeing = [i for i in ids if len({r.per_id.get(i, "missing") for r in answered}) > 1]
        findings.append(TaskVersion.VERDICT_FLAKY)
        report["reference"]["disagreeing_tests"] = disagreeing[:EVIDENCE_ITEMS]
        reasons.append(
            f"{len(answered)} runs with the reference patch disagree: statuses "
            f"{[r.status for r in answered]}"
            + (f", tests {', '.join(disagreeing[:5])}" if disagreeing else "")
        )
    elif answered and not first.resolved:
        failing = _not_passed(first, ids)
        findings.append(TaskVersion.VERDICT_BROKEN_REFERENCE)
        report["reference"]["failing"] = failing[:EVIDENCE_ITEMS]
        reasons.append(
            f"with the reference patch (status {first.status}) "
            f"{len(failing)} of {len(ids)} ids do not pass: "
            + ", ".join(f"{f['test']} {f['status']}" for f in failing[:5])
            + (f" ({first.detail})" if first.detail else "")
        )
    missing = [i for i in ids if all(r.per_id.get(i, "missing") == "missing" for r in answered)]
    report["collection"] = {"missing": missing[:EVIDENCE_ITEMS], "count": len(missing)}
    if answered and missing:
        reasons.append(
            f"{len(missing)} ids were never collected (no such test?): " + ", ".join(missing[:5])
        )

    passing_f2p = [i for i in suite.fail_to_pass if empty.per_id.get(i) == PASSED]
    failing_p2p = _not_passed(empty, suite.pass_to_pass)
    report["empty_patch"] = {
        "status": empty.status,
        "per_id": dict(empty.per_id),
        "fail_to_pass_passing": passing_f2p[:EVIDENCE_ITEMS],
        "pass_to_pass_failing": failing_p2p[:EVIDENCE_ITEMS],
        "detail": empty.detail[:500],
        "wall_ms": round(empty.wall_ms, 1),
    }
    if empty.status == INFRA_ERROR:
        findings.append(TaskVersion.VERDICT_INFRA_ERROR)
        reasons.append(f"empty-patch run: {empty.detail}")
    elif suite.fail_to_pass and len(passing_f2p) == len(suite.fail_to_pass):
        findings.append(TaskVersion.VERDICT_TRIVIAL_PASSES)
        reasons.append(
            "without any patch every FAIL_TO_PASS id already passes: the task cannot fail"
        )
    elif passing_f2p or failing_p2p:
        findings.append(TaskVersion.VERDICT_WRONG_TEST_LISTS)
        parts = []
        if passing_f2p:
            parts.append(
                f"FAIL_TO_PASS ids that pass without the fix: {', '.join(passing_f2p[:5])}"
            )
        if failing_p2p:
            parts.append(
                "PASS_TO_PASS ids that do not pass without the fix: "
                + ", ".join(f"{f['test']} {f['status']}" for f in failing_p2p[:5])
            )
        reasons.append("; ".join(parts))
    return Judgement(findings, reasons, report)
