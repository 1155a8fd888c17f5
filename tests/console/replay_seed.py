"""Seed data of the replay tests: a run over two validated HumanEval tasks, and trajectories
with turns written straight to the database (bulk_create), as a trainer's step would leave them."""

from __future__ import annotations

from sandboxes.result import FAILED, OK, ExecutionResult, TestResult
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from training import services
from training.config import RunConfig
from training.models import MonitorScore, Trajectory, Turn


def seeded_run(humaneval, *, name: str = "replay"):
    """A pending run over HumanEval/0 and /1 (imported, validated), and its two task versions."""
    rows = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "entry_point": r["entry_point"],
            "reference_solution": r["canonical_solution"],
            "tests": r["test"],
            "where": "test",
        }
        for r in humaneval[:2]
    ]
    tasks_import(source="humaneval", task_set_name=name, records=rows)
    task_set = task_set_get(name=name)
    versions = list(task_set_versions(task_set=task_set))
    task_versions_validate(versions=versions, options=Options(reference_runs=1, mutants=0))
    run = services.run_create(task_set=task_set, config=RunConfig.from_dict({"steps": 5}))
    return run, versions


def turn_code(i: int) -> str:
    """The program of turn ``i``: the same function, one comparison and one comment changing per
    turn."""
    op = "<" if i % 2 else "<="
    return (
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        f"    # attempt {i}\n"
        "    for i, a in enumerate(numbers):\n"
        "        for j, b in enumerate(numbers):\n"
        f"            if i != j and abs(a - b) {op} threshold:\n"
        "                return True\n"
        "    return False\n"
    )


def turn_result(i: int, *, long_stdout: bool = False) -> dict:
    passed = i % 3 != 1
    tests = [
        TestResult(id="check#0", passed=True),
        TestResult(
            id="check#1",
            passed=passed,
            error="" if passed else "AssertionError: expected True, got False",
        ),
        TestResult(id="check#2", passed=True, score=0.5, output="True"),
    ]
    stdout = (
        "\n".join(f"trace {i}.{k}: comparing pair {k}" for k in range(300))
        if long_stdout
        else f"turn {i + 1} ran\n"
    )
    return ExecutionResult(
        status=OK if passed else FAILED,
        exit_code=0 if passed else 1,
        stdout=stdout,
        stderr=""
        if passed
        else 'Traceback (most recent call last):\n  File "<check>", line 3\nAssertionError\n',
        truncated=long_stdout,
        wall_ms=120.5 + i,
        cpu_ms=80.0,
        peak_memory_bytes=12_345_678,
        tests=tests,
    ).to_dict()


def seed_trajectory(
    run,
    version,
    *,
    step: int = 1,
    group: int = 0,
    index: int = 0,
    turns: int = 3,
    reward: float = 0.5,
    status: str = OK,
    flags: list | None = None,
    evidence: dict | None = None,
    advantage: float = 0.0,
    monitors: list | None = None,
) -> Trajectory:
    """One trajectory with ``turns`` turns (every third one with a 300-line, truncated stdout)."""
    trajectory = Trajectory.objects.create(
        run=run,
        step=step,
        group=group,
        index_in_group=index,
        task_version=version,
        status=status,
        reward=reward,
        reward_components={"correctness": reward, "efficiency": 0.25},
        advantage=advantage,
        flags=flags or [],
        flag_evidence=evidence or {},
        tests_passed=2,
        tests_total=3,
        prompt_token_ids=[1, 2, 3],
        final_code=turn_code(max(turns - 1, 0)),
    )
    Turn.objects.bulk_create(
        Turn(
            trajectory=trajectory,
            index=i,
            policy_text=f"Turn {i + 1}: I will tighten the comparison.\n```python\n...\n```",
            token_ids=list(range(40)),
            logprobs=[-0.5] * 40,
            action="run_code",
            code=turn_code(i),
            observation=(
                f"Visible tests after turn {i + 1}: {'2/3' if i % 3 == 1 else '3/3'} passed"
            ),
            observation_token_ids=list(range(12)),
            sandbox_status=OK if i % 3 != 1 else FAILED,
            sandbox_result=turn_result(i, long_stdout=i % 3 == 2),
        )
        for i in range(turns)
    )
    for monitor, score, reason in monitors or []:
        MonitorScore.objects.create(
            trajectory=trajectory, monitor=monitor, score=score, reason=reason
        )
    return trajectory


def seed_group(
    run, version, *, step: int = 2, group: int = 0, size: int = 3, turns: int = 3
) -> list[Trajectory]:
    """A group of ``size`` trajectories; the first is flagged, with evidence and monitor scores."""
    out = []
    for index in range(size):
        first = index == 0
        out.append(
            seed_trajectory(
                run,
                version,
                step=step,
                group=group,
                index=index,
                turns=turns,
                reward=[1.0, 0.25, 0.0, 0.5][index % 4],
                flags=["test_tampering"] if first else [],
                advantage=0.75 if first else -0.25,
                evidence={
                    "test_tampering": {"file": "conftest.py", "line": 3, "snippet": "sys.exit(0)"}
                }
                if first
                else {},
                monitors=[
                    ("rules", 0.92, "exits before the checker reports"),
                    ("llm:tiny", 0.3, "looks plausible"),
                ]
                if first
                else [],
            )
        )
    return out
