"""Reward-hacking detectors: one module per family, each a registered callable
``d(submission) -> Flag | None`` over a :class:`~training.rewards.base.GradedSubmission`.

Use::

    from training.hacks import detect, flags_record
    flags = detect(submission)                  # every detector; the program is parsed once
    names, evidence = flags_record(flags)       # Trajectory.flags, Trajectory.flag_evidence

Families: ``early_exit``, ``patched_return``, ``test_tampering``, ``hard_coded_outputs``,
``reads_expected_values``, ``timer_tampering`` (each module's docstring gives its rule).
``probes_run(submissions)`` runs the optional ``patched_return`` probes of a whole batch at
once; without it the detector probes the few submissions that want one by itself (set
``submission.extra["probe"] = False`` to never probe).
"""

from training.flags import HIGH, LOW, MEDIUM, SEVERITIES
from training.hacks.base import (
    DETECTORS,
    Flag,
    detect,
    detector,
    detector_names,
    flags_record,
)
from training.hacks.probe import probes_run

__all__ = [
    "DETECTORS",
    "HIGH",
    "LOW",
    "MEDIUM",
    "SEVERITIES",
    "Flag",
    "detect",
    "detector",
    "detector_names",
    "flags_record",
    "probes_run",
]
