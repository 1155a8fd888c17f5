"""Validation of terminal tasks: does the reference solution pass the verifier every time, and
does the untouched state fail it?

For each version, in fresh sandbox sessions (``tasks_library.terminal.runs``: the solution runs
where the agent would, and its final state is graded exactly as an agent's is):

1. **reference** - ``solution/solve.sh``, N times: every run must earn the full reward (1), and
   the same reward every time. Runs that disagree make the version ``flaky`` (the rewards are
   the evidence); a reward below 1 in every run makes the reference broken (the verifier's
   output and the script's are the evidence).
2. **untouched** - the starting state, graded as it is: its reward must be below the
   reference's. A verifier that the untouched state passes cannot tell a solution from doing
   nothing (``trivial_passes``).

An infrastructure error in any run (a lost session) is not a verdict on the task: the version
is ``infra_error`` and stays out of training until validated again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sandboxes import result as R
from tasks_library.models import TaskVersion
from tasks_library.terminal.library import terminal_task_of
from tasks_library.terminal.runs import grade_untouched, run_reference
from tasks_library.terminal.state import terminal_spec
from tasks_library.validation.repository import Judgement

PARALLEL_RUNS = 2  # each holds a sandbox session (two, while it is graded)


def terminal_versions_judge(
    versions: list[TaskVersion], environments: dict[int, dict], *, reference_runs: int
) -> dict[int, Judgement]:
    """Run each version's reference ``reference_runs`` times and grade its untouched state once,
    :data:`PARALLEL_RUNS` at a time, then judge.

    Returns:
        version id -> :class:`~tasks_library.validation.repository.Judgement`.
    """
    specs = {v.pk: terminal_spec(terminal_task_of(v)) for v in versions}
    jobs = []
    for version in versions:
        environment = environments[version.environment_id]
        jobs += [(version.pk, "reference", environment)] * reference_runs
        jobs.append((version.pk, "untouched", environment))

    def run(job):
        pk, stage, environment = job
        if stage == "reference":
            return run_reference(specs[pk], environment)
        return grade_untouched(specs[pk], environment)

    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        results = list(pool.map(run, jobs))
    by_version: dict[int, dict[str, list]] = {}
    for (pk, stage, _env), result in zip(jobs, results):
        by_version.setdefault(pk, {"reference": [], "untouched": []})[stage].append(result)
    return {
        v.pk: judge(by_version[v.pk]["reference"], by_version[v.pk]["untouched"][0])
        for v in versions
    }


def judge(references: list, untouched) -> Judgement:
    """The findings of one version's runs (:class:`~tasks_library.terminal.runs.ReferenceRun`
    per reference run, the untouched state's ``VerifierOutcome``)."""
    report = {
        "reference": {
            "runs": len(references),
            "rewards": [r.outcome.reward for r in references],
            "evidence": [r.evidence() for r in references],
        },
        "untouched": {
            "reward": untouched.reward,
            "status": untouched.status,
            "detail": untouched.detail,
            "verifier_output": untouched.output[-2000:],
        },
    }
    infra = [r.outcome for r in references if r.outcome.status == R.INFRA_ERROR]
    if untouched.status == R.INFRA_ERROR:
        infra.append(untouched)
    if infra:
        return Judgement(
            [TaskVersion.VERDICT_INFRA_ERROR],
            [f"a sandbox failed during validation: {infra[0].detail}"],
            report,
        )
    findings: list[str] = []
    reasons: list[str] = []
    rewards = [r.outcome.reward for r in references]
    if len(set(rewards)) > 1:
        findings.append(TaskVersion.VERDICT_FLAKY)
        reasons.append(f"the reference earned different rewards in {len(rewards)} runs: {rewards}")
    elif not rewards or rewards[0] < 1.0:
        first = references[0].outcome if references else None
        findings.append(TaskVersion.VERDICT_BROKEN_REFERENCE)
        why = (first.detail or first.output[-300:]) if first else "no run"
        reasons.append(f"the reference solution earned {rewards[0] if rewards else 0}: {why}")
    reference_reward = max(rewards, default=0.0)
    if untouched.status == "ok" and untouched.reward >= max(reference_reward, 1e-9):
        findings.append(TaskVersion.VERDICT_TRIVIAL_PASSES)
        reasons.append(
            f"the untouched state earns {untouched.reward}, as much as the reference: the "
            "verifier cannot tell a solution from doing nothing"
        )
    return Judgement(findings, reasons, report)
