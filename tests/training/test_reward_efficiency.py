"""The efficiency reward: time and memory against the reference's profile, and growth exponents
fitted over input sizes (the fit on synthetic timings; the rest in real sandboxes)."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from sandboxes import result as R
from sandboxes.queue import python_tests, run_many
from training.rewards import efficiency as E
from training.rewards.base import GradedSubmission, ReferenceStats
from training.rewards.registry import reward_components
from training.rollout import TaskSpec

SIZES = [100, 200, 400, 800, 1600, 3200]


def test_growth_exponent_of_linear_and_quadratic_timings():
    assert E.growth_exponent(SIZES, [0.003 * n for n in SIZES]) == pytest.approx(1.0, abs=1e-9)
    assert E.growth_exponent(SIZES, [2e-6 * n * n for n in SIZES]) == pytest.approx(2.0, abs=1e-9)
    assert E.growth_exponent(SIZES, [5.0 for _ in SIZES]) == pytest.approx(0.0, abs=1e-9)
    n_log_n = E.growth_exponent(SIZES, [n * math.log(n) for n in SIZES])
    assert 1.0 < n_log_n < 1.3


def test_growth_exponent_tolerates_measurement_noise():
    rng = random.Random(7)
    noisy = [[0.01 * n * n * rng.uniform(0.9, 1.1) for n in SIZES] for _ in range(20)]
    fits = [E.growth_exponent(SIZES, times) for times in noisy]
    assert all(abs(k - 2.0) < 0.1 for k in fits)


@pytest.mark.parametrize(
    "sizes, times",
    [
        ([100], [1.0]),
        ([100, 200], [1.0]),
        ([100, 100], [1.0, 2.0]),
        ([0, 100], [1.0, 2.0]),
        ([100, 200], [0.0, 1.0]),
    ],
)
def test_growth_exponent_refuses_what_cannot_be_fitted(sizes, times):
    with pytest.raises(ValueError):
        E.growth_exponent(sizes, times)


def graded(cpu_ms: float, memory: int, status: str = R.OK) -> R.ExecutionResult:
    return R.ExecutionResult(
        status=status, wall_ms=cpu_ms * 1.5, cpu_ms=cpu_ms, peak_memory_bytes=memory
    )


REF = ReferenceStats(wall_ms=6.0, cpu_ms=4.0, peak_memory_bytes=2 * 1024**2)


def test_score_formula():
    assert E.efficiency_score(graded(4.0, 2 * 1024**2), REF) == 1.0
    assert (
        E.efficiency_score(graded(2.0, 1 * 1024**2), REF) == 1.0
    )  # better than the reference: capped
    # Time only: T = (4 + 5) / (40 + 5) = 0.2.
    assert E.efficiency_score(graded(40.0, 2 * 1024**2), REF) == pytest.approx(0.2**0.7)
    # Memory only: M = (2 + 4) / (62 + 4) MiB.
    assert E.efficiency_score(graded(4.0, 62 * 1024**2), REF) == pytest.approx((6 / 66) ** 0.3)
    assert E.efficiency_score(graded(4.0, 2 * 1024**2, R.FAILED), REF) == 0.0
    assert E.efficiency_score(graded(4.0, 2 * 1024**2, R.TIMEOUT), REF) == 0.0
    assert E.efficiency_score(graded(4.0, 2 * 1024**2), None) == E.NEUTRAL == 0.5


def test_growth_lowers_a_quadratic_answer_to_a_linear_problem():
    linear = ReferenceStats(
        wall_ms=6.0, cpu_ms=4.0, peak_memory_bytes=2 * 1024**2, growth_exponent=1.0
    )
    same = graded(4.0, 2 * 1024**2)
    assert E.efficiency_score(same, linear, growth=1.1) == 1.0  # within the fit's tolerance
    quadratic = E.efficiency_score(same, linear, growth=2.0)
    assert quadratic == pytest.approx((2**-0.8) ** 0.3)
    assert quadratic < E.efficiency_score(same, linear, growth=1.5) < 1.0
    # Unknown on either side: growth is left out.
    assert E.efficiency_score(same, linear, growth=None) == 1.0
    assert E.efficiency_score(same, REF, growth=2.0) == 1.0


PROMPT = 'def has_duplicate(xs):\n    """True when some value appears twice in xs."""\n'
LINEAR = (
    PROMPT + "    seen = set()\n    for x in xs:\n        if x in seen:\n            return True\n"
    "        seen.add(x)\n    return False\n"
)
QUADRATIC = (
    PROMPT + "    for i in range(len(xs)):\n        for j in range(i + 1, len(xs)):\n"
    "            if xs[i] == xs[j]:\n                return True\n    return False\n"
)
# Right, but burns CPU on every call.
SLOW = PROMPT + "    sum(i * i for i in range(300_000))\n    return len(set(xs)) < len(xs)\n"
HIDDEN = (
    "def check(candidate):\n    assert candidate([1, 2, 1])\n    assert not candidate([1, 2, 3])\n"
    "    assert not candidate([])\n"
)
GROWTH = {"sizes": [1000, 2000, 4000], "args": "lambda n: (list(range(n)),)"}
TASK = TaskSpec(
    task_version_id=1,
    prompt=PROMPT,
    entry_point="has_duplicate",
    visible_tests="",
    hidden_tests=HIDDEN,
    timeout_s=20,
    reference_solution=LINEAR[len(PROMPT) :],
    files={E.SIZES_FILE: json.dumps(GROWTH)},
)


def test_growth_exponents_measured_in_the_sandbox():
    linear, quadratic = E.measure_growth_many([(TASK, LINEAR), (TASK, QUADRATIC)])
    # Fitted over 1000..4000 items, a quadratic measures below 2 by as much as 0.3 on a loaded
    # machine (CI measured 1.69: the smallest size's time carries a fixed share that a fit over
    # three sizes reads as a lower slope); what the reward needs is the gap, asserted below.
    assert 0.5 < linear < 1.4
    assert 1.5 < quadratic < 2.3
    assert quadratic > linear + 0.5, (linear, quadratic)
    no_spec = TaskSpec(
        task_version_id=2,
        prompt=PROMPT,
        entry_point="has_duplicate",
        visible_tests="",
        hidden_tests=HIDDEN,
        timeout_s=20,
    )
    assert E.measure_growth_many([(no_spec, LINEAR)]) == [None]
    assert E.growth_requests(no_spec, LINEAR) == []
    # A wrong program has no growth to speak of.
    assert E.measure_growth_many([(TASK, PROMPT + "    raise ValueError\n")]) == [None]


def test_slow_and_quadratic_answers_score_lower_than_the_reference_in_the_sandbox():
    runs = 3
    programs = [LINEAR, SLOW]
    results = run_many(
        [
            python_tests(p, HIDDEN, "has_duplicate", prompt=PROMPT, files=TASK.files)
            for p in programs
            for _ in range(runs)
        ]
    )
    assert all(r.status == R.OK for r in results), [r.status for r in results]
    reference_runs, slow_runs = results[:runs], results[runs:]
    linear_k, quadratic_k = E.measure_growth_many([(TASK, LINEAR), (TASK, QUADRATIC)])
    reference = ReferenceStats(
        wall_ms=statistics.median(r.wall_ms for r in reference_runs),
        cpu_ms=statistics.median(r.cpu_ms for r in reference_runs),
        peak_memory_bytes=int(statistics.median(r.peak_memory_bytes for r in reference_runs)),
        growth_exponent=linear_k,
    )

    def score(program, grade, growth=None):
        sub = GradedSubmission(
            task=TASK,
            code=program,
            grade=grade,
            reference=reference,
            extra={} if growth is None else {"growth_exponent": growth},
        )
        return reward_components(sub, ["efficiency"])["efficiency"]

    honest = [score(LINEAR, r, linear_k) for r in reference_runs]
    assert min(honest) > 0.8
    slow = [score(SLOW, r) for r in slow_runs]
    assert max(slow) < 0.6  # tens of milliseconds of CPU against a few
    # The measurement separates the two (about 1 against 2), and growth costs the quadratic answer
    # its share: G = 2^-(k - k_ref - 0.2) is about 0.6, weighed with time into a total of about
    # 0.85 (0.86 when the reference measured 1.05): a clear margin below the linear answer's 1.0.
    assert quadratic_k > linear_k + 0.7, (linear_k, quadratic_k)
    assert score(QUADRATIC, reference_runs[0], quadratic_k) < 0.9 * score(
        LINEAR, reference_runs[0], linear_k
    )
    failing = R.ExecutionResult(status=R.FAILED, cpu_ms=1.0)
    assert score(LINEAR, failing) == 0.0
