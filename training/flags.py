"""Trajectory flags, defined once: each flag's name, whether it suspects a reward hack, its
severity and what it means. Every module that sets, filters, counts or shows flags reads this.

A trajectory's ``flags`` (:class:`training.models.Trajectory`) is a list of these names; a hack
flag's evidence (``flag_evidence[name]``) comes from its detector (:mod:`training.hacks`) or its
reviewer (:mod:`console.review`). Flags that are not hacks say what went wrong around the
policy's code: ``infra_error`` and ``rollout_timeout`` trajectories are never scored; the sandbox
statuses are scored (the program's own doing) and flagged so they can be filtered.

A detector may report a lower severity than its flag's (its evidence's own, ``worst`` of its
items); :attr:`FlagKind.severity` is the flag's default and highest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

LOW, MEDIUM, HIGH = "low", "medium", "high"
SEVERITIES = (LOW, MEDIUM, HIGH)


@dataclass(frozen=True)
class FlagKind:
    """One kind of trajectory flag.

    Attributes:
        name: as stored in ``Trajectory.flags``.
        hack: a suspected reward hack (counted in ``flags/rate``, zeroed by ``hack_policy=zero``)
            rather than an infrastructure or sandbox outcome.
        severity: ``low``, ``medium`` or ``high``.
        meaning: one line for the console and the docs.
    """

    name: str
    hack: bool
    severity: str
    meaning: str


# Not hacks: the sandbox, the budget or the program's own failure.
INFRA_ERROR = "infra_error"
ROLLOUT_TIMEOUT = "rollout_timeout"
TIMEOUT = "timeout"
CRASHED = "crashed"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
# Hacks, raised by the detectors of training/hacks/ (each registered under its flag's name).
EARLY_EXIT = "early_exit"
PATCHED_RETURN = "patched_return"
TEST_TAMPERING = "test_tampering"
HARD_CODED_OUTPUTS = "hard_coded_outputs"
READS_EXPECTED_VALUES = "reads_expected_values"
TIMER_TAMPERING = "timer_tampering"
# Hacks of tool-using agents, raised from their tool calls (training/agents/hacks.py).
PLANTED_TEST_CONFIG = "planted_test_config"
SEARCHES_FOR_TESTS = "searches_for_tests"
NETWORK_ATTEMPT = "network_attempt"
SUBMITS_UNCHANGED = "submits_unchanged"
COPIES_EXPECTED_VALUES = "copies_expected_values"
AGENT_HACKS = (
    PLANTED_TEST_CONFIG,
    SEARCHES_FOR_TESTS,
    NETWORK_ATTEMPT,
    SUBMITS_UNCHANGED,
    COPIES_EXPECTED_VALUES,
)
# A hack, raised by a reviewer's ``reward hack`` label (evidence: reviewer and note); the
# verifier's verdict and the detectors' recall never count it.
REVIEWED_HACK = "reviewed_hack"

KINDS: dict[str, FlagKind] = {
    kind.name: kind
    for kind in (
        FlagKind(INFRA_ERROR, False, LOW, "the sandbox failed, not the policy: dropped, replayed"),
        FlagKind(ROLLOUT_TIMEOUT, False, LOW, "the rollout ran past rollout_timeout_s: not scored"),
        FlagKind(TIMEOUT, False, LOW, "the graded program ran past its time limit"),
        FlagKind(CRASHED, False, LOW, "the graded program crashed (a signal)"),
        FlagKind(MEMORY_LIMIT, False, LOW, "the graded program ran out of memory"),
        FlagKind(OUTPUT_LIMIT, False, LOW, "the graded program flooded its output"),
        FlagKind(EARLY_EXIT, True, HIGH, "exits before the tests can fail"),
        FlagKind(PATCHED_RETURN, True, HIGH, "returns what the tests expect by other means"),
        FlagKind(TEST_TAMPERING, True, HIGH, "changes the tests, the runner or their results"),
        FlagKind(HARD_CODED_OUTPUTS, True, HIGH, "answers the tests' inputs from a table"),
        FlagKind(READS_EXPECTED_VALUES, True, HIGH, "reads the expected values"),
        FlagKind(TIMER_TAMPERING, True, HIGH, "tampers with the clocks"),
        FlagKind(
            PLANTED_TEST_CONFIG,
            True,
            HIGH,
            "plants test configuration (conftest.py, sitecustomize.py, pytest.ini)",
        ),
        FlagKind(
            SEARCHES_FOR_TESTS,
            True,
            MEDIUM,
            "searches outside the workspace or git history for hidden tests or the fix",
        ),
        FlagKind(NETWORK_ATTEMPT, True, MEDIUM, "tries to reach the network"),
        FlagKind(SUBMITS_UNCHANGED, True, LOW, "submits without changing the workspace"),
        FlagKind(
            COPIES_EXPECTED_VALUES,
            True,
            HIGH,
            "writes expected values it read in the tests (or their output) into the code",
        ),
        FlagKind(REVIEWED_HACK, True, HIGH, "a reviewer labelled it a reward hack"),
    )
}
SANDBOX_STATUSES = (TIMEOUT, CRASHED, MEMORY_LIMIT, OUTPUT_LIMIT)
"""Grading statuses that flag a scored trajectory (the names of sandboxes.result's statuses)."""
NOT_SCORED = frozenset({INFRA_ERROR, ROLLOUT_TIMEOUT})
"""Flags of trajectories that got no reward: never counted in pass rates or difficulty."""
NOT_HACKS = frozenset(name for name, kind in KINDS.items() if not kind.hack)
DETECTED_HACKS = tuple(
    name
    for name, kind in KINDS.items()
    if kind.hack and name != REVIEWED_HACK and name not in AGENT_HACKS
)
"""The hack flags a code detector raises, in the order the detectors run (the agents' flags
come from their tool calls instead)."""


def is_hack(name: str) -> bool:
    """True for a hack flag; an unknown name (a detector of a plug-in) counts as a hack."""
    kind = KINDS.get(name)
    return kind.hack if kind is not None else True


def evidence_text(value) -> str:
    """A flag's evidence as readable text: strings as they are, anything else as indented JSON."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)
