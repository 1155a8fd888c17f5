"""The validation pipeline: is a task version verifiable before training touches it?

Stages, each run in the sandbox pool (every execution of every version is queued
at once, so the workers stay busy), each leaving evidence in ``TaskVersion.report``:

1. **reference** - the reference solution runs N times (default 5); every run must
   pass every hidden test with the same per-test results. A consistent failure marks
   the reference broken; runs that disagree mark the version flaky.
2. **trivial** - a solution that does nothing (the prompt with an empty body) must
   fail: a suite it passes cannot fail, and is marked broken.
3. **examples** - the examples written in the prompt (doctests, ``f(x) -> y`` lines)
   run against the reference; a mismatch means the prompt contradicts the tests.
4. **mutation** - mutants of the reference (operator, comparison, constant,
   boundary, return mutations) run on the hidden tests; the share killed is the
   mutation score, and a suite below the threshold is marked weak.

Repository tasks (SWE-bench's shape) have a stage of their own instead: the reference patch
resolves the task N times with the same per-id results, the empty patch fails every
FAIL_TO_PASS id and passes every PASS_TO_PASS id, every id is collected (see
:mod:`tasks_library.validation.repository`).

The verdict is the most serious finding; broken, flaky and contradicting versions
are quarantined automatically (a curator may override, with a written reason).
Sources: EvalPlus (Liu et al., NeurIPS 2023) for trivial/example checks and test
strength; mutation analysis as in PIT and Jia & Harman's survey (TSE 2011).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from core.errors import InputError
from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.suites import harness
from tasks_library.environments import EnvironmentUnavailable, environment_build
from tasks_library.models import TaskVersion
from tasks_library.validation import examples as E
from tasks_library.validation import mutants as M
from tasks_library.validation import repository as RV
from tasks_library.validation import terminal as TV

# Most serious first: the verdict is the first of these that any stage found.
SEVERITY = (
    TaskVersion.VERDICT_INFRA_ERROR,
    TaskVersion.VERDICT_BROKEN_REFERENCE,
    TaskVersion.VERDICT_FLAKY,
    TaskVersion.VERDICT_TRIVIAL_PASSES,
    TaskVersion.VERDICT_WRONG_TEST_LISTS,
    TaskVersion.VERDICT_PROMPT_CONTRADICTS,
    TaskVersion.VERDICT_WEAK_SUITE,
)
# The language of each sandbox runtime's programs (which mutant maker applies); prompt
# examples are function calls, so only the unit-test harnesses run them.
LANGUAGES = {"python": "python", "node": "javascript"}
EXAMPLE_HARNESSES = ("python-check", "js-console-assert")
MUTANT_MAKERS: dict[str, Callable] = {
    "python": M.python_mutants,
    "javascript": M.javascript_mutants,
}
EXAMPLE_READERS: dict[str, Callable] = {
    "python": E.python_prompt_examples,
    "javascript": E.javascript_prompt_examples,
}
EVIDENCE_ITEMS = 10  # survivors, failing tests, examples kept per stage
# A mutant may run this many times longer than the reference's median run (and never
# less than MUTANT_MIN_WALL_S) before it is stopped; like PIT, a mutant that times
# out counts as killed. Mutants that loop forever would otherwise each hold a worker
# slot for the suite's whole timeout.
MUTANT_SLOWDOWN = 10
MUTANT_MIN_WALL_S = 2.0
# Bounds of the options: flakiness shows in a handful of runs, and a reference's mutation
# operators give far fewer distinct mutants than this on any task of the library.
REFERENCE_RUNS_MAX = 50
MUTANTS_MAX = 500


@dataclass(frozen=True)
class Options:
    """What the pipeline runs.

    Attributes:
        reference_runs: times the reference runs (N); disagreement is flakiness.
        mutants: most mutants per version (0 skips the mutation stage).
        weak_threshold: a mutation score below this marks the suite weak, in [0, 1].
        examples: run the prompt's examples against the reference.
    """

    reference_runs: int = 5
    mutants: int = 30
    weak_threshold: float = 0.6
    examples: bool = True

    def check(self) -> None:
        """Raises InputError naming the first impossible option (``field``: the option's name)."""
        # Upper bounds too: each reference run and each mutant is a sandbox execution per
        # version, planned up front (a reference_runs of 10**20 once held a worker's memory).
        if not 1 <= self.reference_runs <= REFERENCE_RUNS_MAX:
            raise InputError(
                f"reference_runs must be from 1 to {REFERENCE_RUNS_MAX}, got {self.reference_runs}",
                field="reference_runs",
            )
        if not 0 <= self.mutants <= MUTANTS_MAX:
            raise InputError(
                f"mutants must be from 0 to {MUTANTS_MAX}, got {self.mutants}", field="mutants"
            )
        if not 0 <= self.weak_threshold <= 1:
            raise InputError(
                f"weak_threshold must be in [0, 1], got {self.weak_threshold}",
                field="weak_threshold",
            )


@dataclass
class Plan:
    """The executions queued for one version, by stage, and how to judge them."""

    version: TaskVersion
    # Each execution is (stage, index into that stage's batch).
    reference: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    trivial: tuple[str, int] = ("trivial", -1)
    examples: list[E.PromptExample] = dataclasses.field(default_factory=list)
    examples_run: tuple[str, int] | None = None
    mutants: list[M.Mutant] = dataclasses.field(default_factory=list)
    mutant_runs: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    environment: dict | None = None  # the request field of its built environment


def trivial_solution(version: TaskVersion) -> str:
    """A solution that does nothing: in Python the prompt alone (a function whose body is
    its docstring, returning None); in JavaScript the prompt with its body closed."""
    return harness(version.test_suite.harness).trivial(version.prompt)


STAGES = ("reference", "trivial", "examples", "mutation")


def _plan(
    version: TaskVersion,
    options: Options,
    batches: dict[str, list[dict]],
    environment: dict | None = None,
) -> Plan:
    suite = version.test_suite
    kind = harness(suite.harness)
    language = LANGUAGES.get(kind.runtime)
    limits = suite.limits()

    def queue(stage: str, program: str, tests: str) -> tuple[str, int]:
        batches[stage].append(
            kind.request(
                program,
                tests,
                version.entry_point,
                prompt=version.prompt,
                limits=limits,
                files=version.files,
                setup=suite.setup_code,
                environment=environment,
            )
        )
        return stage, len(batches[stage]) - 1

    plan = Plan(version=version, environment=environment)
    reference = version.prompt + version.reference_solution
    plan.reference = [
        queue("reference", reference, suite.hidden_tests) for _ in range(options.reference_runs)
    ]
    plan.trivial = queue("trivial", trivial_solution(version), suite.hidden_tests)
    if options.examples and suite.harness in EXAMPLE_HARNESSES:
        plan.examples = EXAMPLE_READERS[language](version.prompt, version.entry_point)
        if plan.examples:
            source = E.examples_test_source(plan.examples, version.entry_point, language=language)
            plan.examples_run = queue("examples", reference, source)
    if options.mutants and language:
        try:
            plan.mutants = MUTANT_MAKERS[language](
                version.prompt, version.reference_solution, limit=options.mutants
            )
        except SyntaxError as exc:
            plan.notes.append(
                f"no mutants: the reference does not parse ({exc.msg}, line {exc.lineno})"
            )
        plan.mutant_runs = [queue("mutation", m.program, suite.hidden_tests) for m in plan.mutants]
    return plan


def _failing(result: R.ExecutionResult) -> list[dict]:
    return [{"test": t.id, "error": t.error} for t in result.tests if not t.passed][:EVIDENCE_ITEMS]


def _judge(
    plan: Plan, batches: dict[str, list[R.ExecutionResult]], options: Options
) -> tuple[list[str], list[str], dict, float | None]:
    """Findings (verdicts), human-readable reasons, the report and the mutation score."""
    findings: list[str] = []
    reasons: list[str] = []
    report: dict = {"options": dataclasses.asdict(options), "notes": plan.notes}
    report["environment"] = {
        "key": (plan.environment or {}).get("key", ""),
        "runtime": (plan.environment or {}).get("runtime", ""),
    }

    def results(at: tuple[str, int]) -> R.ExecutionResult:
        return batches[at[0]][at[1]]

    runs = [results(at) for at in plan.reference]
    # What the workers say each run ran in (verified on their first mount of it).
    report["environment"]["ran_in"] = sorted({r.environment for r in runs if r.environment})
    vectors = [tuple(t.passed for t in r.tests) for r in runs if r.status != R.INFRA_ERROR]
    report["reference"] = {
        "runs": len(runs),
        "passed_runs": sum(r.passed for r in runs),
        "statuses": [r.status for r in runs],
        "wall_ms_median": sorted(r.wall_ms for r in runs)[len(runs) // 2],
    }
    if any(r.status == R.INFRA_ERROR for r in runs):
        findings.append(TaskVersion.VERDICT_INFRA_ERROR)
        reasons.append(
            "reference run: " + next(r.detail for r in runs if r.status == R.INFRA_ERROR)
        )
    if len(set(vectors)) > 1 or len({r.status for r in runs if r.status != R.INFRA_ERROR}) > 1:
        ids = [t.id for t in runs[0].tests]
        disagreeing = [
            tid for k, tid in enumerate(ids) if len({v[k] for v in vectors if k < len(v)}) > 1
        ]
        findings.append(TaskVersion.VERDICT_FLAKY)
        report["reference"]["disagreeing_tests"] = disagreeing[:EVIDENCE_ITEMS]
        reasons.append(
            f"{len(runs)} runs of the reference disagree: statuses {[r.status for r in runs]}"
            + (f", tests {', '.join(disagreeing[:5])}" if disagreeing else "")
        )
    elif runs and not runs[0].passed and runs[0].status != R.INFRA_ERROR:
        failing = _failing(runs[0])
        findings.append(TaskVersion.VERDICT_BROKEN_REFERENCE)
        report["reference"]["failing"] = failing
        reasons.append(
            f"reference status {runs[0].status}"
            + "".join(f"; {f['test']}: {f['error']}" for f in failing[:3])
        )

    trivial = results(plan.trivial)
    report["trivial"] = {
        "status": trivial.status,
        "tests_passed": trivial.tests_passed,
        "tests_total": trivial.tests_total,
    }
    if trivial.status == R.INFRA_ERROR:
        findings.append(TaskVersion.VERDICT_INFRA_ERROR)
        reasons.append(f"trivial run: {trivial.detail}")
    elif trivial.passed:
        findings.append(TaskVersion.VERDICT_TRIVIAL_PASSES)
        reasons.append(
            "the prompt with an empty body passes every hidden test: the suite cannot fail"
        )

    if plan.examples_run is not None:
        run = results(plan.examples_run)
        by_id = {t.id: t for t in run.tests}
        failing = [
            {
                "example": ex.text,
                "line": ex.line,
                "error": by_id[f"assert_{k}"].error if f"assert_{k}" in by_id else "not run",
            }
            for k, ex in enumerate(plan.examples)
            if not (f"assert_{k}" in by_id and by_id[f"assert_{k}"].passed)
        ]
        report["examples"] = {
            "count": len(plan.examples),
            "status": run.status,
            "contradicting": failing[:EVIDENCE_ITEMS],
        }
        if run.status == R.INFRA_ERROR:
            findings.append(TaskVersion.VERDICT_INFRA_ERROR)
            reasons.append(f"examples run: {run.detail}")
        elif failing and TaskVersion.VERDICT_BROKEN_REFERENCE not in findings:
            findings.append(TaskVersion.VERDICT_PROMPT_CONTRADICTS)
            reasons.append(
                f"{len(failing)} of {len(plan.examples)} prompt examples disagree with the "
                f"reference; first: line {failing[0]['line']}: {failing[0]['example']} "
                f"({failing[0]['error']})"
            )
    else:
        report["examples"] = {"count": 0}

    score = None
    outcomes = [(m, results(at)) for m, at in zip(plan.mutants, plan.mutant_runs)]
    judged = [(m, r) for m, r in outcomes if r.status != R.INFRA_ERROR]
    if judged:
        survivors = [m for m, r in judged if r.passed]
        score = round(1 - len(survivors) / len(judged), 4)
        report["mutation"] = {
            "mutants": len(judged),
            "killed": len(judged) - len(survivors),
            "score": score,
            "killed_by_timeout": sum(r.status == R.TIMEOUT for _m, r in judged),
            "threshold": options.weak_threshold,
            "survivors": [
                {"id": m.id, "operator": m.operator, "description": m.description}
                for m in survivors[:EVIDENCE_ITEMS]
            ],
        }
        if score < options.weak_threshold and not {
            TaskVersion.VERDICT_BROKEN_REFERENCE,
            TaskVersion.VERDICT_FLAKY,
        } & set(findings):
            findings.append(TaskVersion.VERDICT_WEAK_SUITE)
            reasons.append(
                f"mutation score {score:.2f} < {options.weak_threshold}: {len(survivors)} of "
                f"{len(judged)} mutants survive, e.g. {survivors[0].description}"
            )
    else:
        report["mutation"] = {"mutants": 0}
    return findings, reasons, report, score


def _bound_mutants(plan: Plan, reference: list[R.ExecutionResult], batch: list[dict]) -> None:
    """Give the plan's mutant runs a wall and CPU limit scaled from the reference's runs."""
    walls = sorted(
        reference[index].wall_ms
        for _stage, index in plan.reference
        if reference[index].status == R.OK
    )
    if not walls:
        return
    suite_timeout = plan.version.test_suite.timeout_s
    wall_s = min(
        suite_timeout, max(MUTANT_MIN_WALL_S, MUTANT_SLOWDOWN * walls[len(walls) // 2] / 1000)
    )
    for _stage, index in plan.mutant_runs:
        batch[index]["limits"].update(wall_timeout_s=wall_s, cpu_s=max(1, int(wall_s) + 1))


def verdict_of(findings: list[str]) -> str:
    """The most serious finding, or ``valid`` when there is none."""
    return next((v for v in SEVERITY if v in findings), TaskVersion.VERDICT_VALID)


def task_versions_validate(
    *,
    versions: list[TaskVersion],
    options: Options | None = None,
    timings: dict | None = None,
    on_stage: Callable[[str, int, int], None] | None = None,
) -> list[TaskVersion]:
    """Run the pipeline on ``versions`` in the sandbox pool; store one report per version.

    Stage by stage, every execution of every version is queued at once (repository versions:
    one stage of gradings in sandbox sessions, :mod:`tasks_library.validation.repository`). Each
    version's verdict, reasons, report and mutation score are then saved in one small
    transaction; a quarantining verdict quarantines the version unless a curator
    overrode it.

    Args:
        timings: when given, filled with ``{stage: {"executions", "seconds"}}``.
        on_stage: when given, called ``(stage, stages done, stages in all)`` as each stage
            starts (those of :data:`STAGES` when there are function tasks, ``"repository"``
            when there are repository tasks), then as the verdicts are stored (``"storing"``).

    Raises:
        ValueError: impossible ``options``.

    Returns:
        The versions, in the given order, with the stored fields set.
    """
    options = options or Options()
    options.check()
    requests: dict[str, list[dict]] = {stage: [] for stage in STAGES}
    built, refused = _build_environments(versions)
    for version in versions:
        if version.environment_id in refused:
            _store_unbuilt(version, refused[version.environment_id])
    versions_to_run = [v for v in versions if v.environment_id in built]
    repositories = [v for v in versions_to_run if v.is_repository]
    terminals = [v for v in versions_to_run if v.is_terminal]
    plans = [
        _plan(version, options, requests, built[version.environment_id])
        for version in versions_to_run
        if not version.is_repository and not version.is_terminal
    ]
    # A function stage runs when there are function tasks; repository tasks are one stage, and
    # terminal tasks one more.
    stages = [
        *(STAGES if plans or not (repositories or terminals) else ()),
        *(("repository",) * bool(repositories)),
        *(("terminal",) * bool(terminals)),
    ]
    results: dict[str, list[R.ExecutionResult]] = {}
    judged: dict[int, RV.Judgement] = {}
    for done, stage in enumerate(stages):
        if on_stage is not None:
            on_stage(stage, done, len(stages) + 1)
        started = time.monotonic()
        if stage in ("repository", "terminal"):
            judge_stage = (
                RV.repository_versions_judge
                if stage == "repository"
                else TV.terminal_versions_judge
            )
            subjects = repositories if stage == "repository" else terminals
            judged.update(judge_stage(subjects, built, reference_runs=options.reference_runs))
            if timings is not None:
                timings[stage] = {
                    "executions": len(subjects) * (options.reference_runs + 1),
                    "seconds": round(time.monotonic() - started, 3),
                }
            continue
        if stage == "mutation":
            for plan in plans:
                _bound_mutants(plan, results["reference"], requests["mutation"])
        results[stage] = run_many(requests[stage])
        if timings is not None:
            timings[stage] = {
                "executions": len(requests[stage]),
                "seconds": round(time.monotonic() - started, 3),
            }
    if on_stage is not None:
        on_stage("storing", len(stages), len(stages) + 1)
    for plan in plans:
        findings, reasons, report, score = _judge(plan, results, options)
        _store(plan.version, verdict_of(findings), reasons, report, score)
    for version in [*repositories, *terminals]:
        judgement = judged[version.pk]
        judgement.report["options"] = {"reference_runs": options.reference_runs}
        key = built[version.environment_id].get("key", "")
        judgement.report.setdefault("environment", {})["key"] = key
        _store(version, verdict_of(judgement.findings), judgement.reasons, judgement.report, None)
    return versions


def _build_environments(versions: list[TaskVersion]) -> tuple[dict[int, dict], dict[int, str]]:
    """Build each distinct environment of ``versions`` once (a cache hit when built).

    Returns:
        ``(built, refused)``: environment id -> the request field of its build, and
        environment id -> why it cannot be built (the versions that need it stay unvalidated).
    """
    built: dict[int, dict] = {}
    refused: dict[int, str] = {}
    for version in versions:
        env = version.environment
        if env.pk in built or env.pk in refused:
            continue
        try:
            built[env.pk] = environment_build(environment=env).request_field()
        except EnvironmentUnavailable as exc:
            refused[env.pk] = str(exc)
    return built, refused


def _store_unbuilt(version: TaskVersion, reason: str) -> None:
    """A version whose environment could not be built: not validated (``pending``), with the
    build's error as its reason; never broken, never quarantined for it."""
    fields = {
        "verdict": TaskVersion.VERDICT_PENDING,
        "verdict_reasons": [f"not validated: {reason}"],
        "report": {"environment": {"error": reason}},
        "validated_at": None,
    }
    TaskVersion.objects.filter(pk=version.pk).update(**fields)
    for name, value in fields.items():
        setattr(version, name, value)


def _store(
    version: TaskVersion, verdict: str, reasons: list[str], report: dict, score: float | None
) -> None:
    with transaction.atomic():
        current = TaskVersion.objects.select_for_update().get(pk=version.pk)
        fields = {
            "verdict": verdict,
            "verdict_reasons": reasons,
            "report": report,
            "mutation_score": score,
            "validated_at": timezone.now(),
        }
        automatic = current.quarantine_reason.startswith("automatic:")
        if current.quarantined and not automatic:
            pass  # a curator's own quarantine stands, with the curator's reason
        elif verdict in TaskVersion.QUARANTINING and not current.override_reason:
            fields.update(quarantined=True, quarantine_reason=f"automatic: {verdict}")
        elif automatic:  # the finding that quarantined it is gone
            fields.update(quarantined=False, quarantine_reason="")
        TaskVersion.objects.filter(pk=version.pk).update(**fields)
        for name, value in fields.items():
            setattr(version, name, value)
