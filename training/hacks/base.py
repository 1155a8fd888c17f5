"""Hack flags and the detector registry.

A detector is a plain callable ``d(submission) -> Flag | None`` registered by name (as reward
functions are, training/rewards/registry.py). :func:`detect` runs every registered detector
on one :class:`~training.rewards.base.GradedSubmission` and returns the flags raised, each
with short, concrete evidence (line numbers and code, test ids, audit events).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from training.flags import DETECTED_HACKS, HIGH, LOW, SEVERITIES
from training.rewards.base import GradedSubmission

log = logging.getLogger(__name__)

MAX_ITEMS = 5  # evidence items kept per kind: enough to review, short enough to store


@dataclass(frozen=True)
class Flag:
    """A suspected reward hack.

    Attributes:
        name: the detector's name, a flag of :mod:`training.flags` (``early_exit``...).
        evidence: what it saw, short and concrete: ``{"source": [{"line", "code", "what"}],
            "result": {...test ids...}, "audit": [...]}``.
        severity: ``low``, ``medium`` or ``high``.
    """

    name: str
    evidence: dict = field(default_factory=dict)
    severity: str = HIGH

    def record(self) -> dict:
        """The evidence as stored on a trajectory (``flag_evidence[name]``), severity included."""
        return {**self.evidence, "severity": self.severity}


Detector = Callable[[GradedSubmission], "Flag | None"]
DETECTORS: dict[str, Detector] = {}


def detector(name: str) -> Callable[[Detector], Detector]:
    """Register ``d`` as the detector ``name`` (a decorator).

    Raises:
        ValueError: ``name`` is taken.
    """

    def register(function: Detector) -> Detector:
        if name in DETECTORS and DETECTORS[name] is not function:
            raise ValueError(f"hack detector {name!r} is registered twice")
        DETECTORS[name] = function
        return function

    return register


BUILTIN = DETECTED_HACKS  # each built-in detector's module is named after its flag


def _load_builtin() -> None:
    # The built-in detectors register themselves on import (in this order).
    if len(DETECTORS) < len(BUILTIN):
        for module in BUILTIN:
            importlib.import_module(f"training.hacks.{module}")


def detector_names() -> list[str]:
    """Every registered detector's name, in registration order."""
    _load_builtin()
    return list(DETECTORS)


def detect(submission: GradedSubmission, names=None) -> list[Flag]:
    """Run the detectors (all, or those ``names``) on ``submission``; the flags raised.

    The program is parsed once for all of them (``submission.extra``). A detector that
    fails is logged and skipped: a bug in one detector never stops a training step.

    Raises:
        KeyError: an unknown detector name.
    """
    _load_builtin()
    changed = submission.extra.get("changed") or {}
    if changed:
        return _detect_changed(submission, changed, names)
    flags = []
    for name in names if names is not None else list(DETECTORS):
        function = DETECTORS[name]
        try:
            flag = function(submission)
        except Exception:  # see the docstring
            log.exception("hack detector %s failed", name)
            continue
        if flag is not None:
            flags.append(flag)
    return flags


# In a repository, importing pytest is what an honest test helper module does.
HONEST_IN_A_REPOSITORY = ("imports pytest",)


def _detect_changed(submission: GradedSubmission, changed: dict, names) -> list[Flag]:
    """The detectors on an answer of many files (a repository task): each changed non-test
    Python file on its own, keeping the evidence on the lines the submission wrote (the
    project's own unchanged code is never evidence), each item naming its file."""
    from training.hacks.repository import constructs  # noqa: PLC0415 - repository answers only

    repository = getattr(submission.task, "repository", None)
    tests = {**getattr(repository, "test_files", {}), **getattr(repository, "hidden_files", {})}
    test_sources = [
        bytes(c).decode("utf-8", "replace") for p, c in tests.items() if p.endswith(".py")
    ]
    found: dict[str, list[dict]] = {}
    severities: dict[str, list[str]] = {}
    for path, (source, lines) in sorted(changed.items()):
        written = set(lines)
        for name, hits in constructs(source, test_sources).items():
            if names is not None and name not in names:
                continue
            for line, what, severity in hits:
                if line in written:
                    code = source.splitlines()[line - 1].strip()[:80] if line else ""
                    found.setdefault(name, []).append(
                        {"line": line, "code": code, "what": what, "path": path}
                    )
                    severities.setdefault(name, []).append(severity)
        part = GradedSubmission(
            task=submission.task,
            code=source,
            grade=submission.grade,
            visible=None,
            reference=None,
            extra={"probe": False},
        )
        for flag in detect(part, names):
            kept = [
                {**item, "path": path}
                for item in flag.evidence.get("source", [])
                if item.get("line") in written
                and not any(h in str(item.get("what", "")) for h in HONEST_IN_A_REPOSITORY)
            ]
            if kept:
                found.setdefault(flag.name, []).extend(kept)
                severities.setdefault(flag.name, []).append(flag.severity)
    return [Flag(name, {"source": items(found[name])}, worst(severities[name])) for name in found]


def flags_record(flags: list[Flag]) -> tuple[list[str], dict]:
    """``(names, evidence)`` for :class:`training.models.Trajectory` ``flags`` and
    ``flag_evidence`` (each evidence dict carries its ``severity``)."""
    return [f.name for f in flags], {f.name: f.record() for f in flags}


def items(found: list, limit: int = MAX_ITEMS) -> list:
    """The first ``limit`` evidence items, without repeats."""
    kept = []
    for item in found:
        if item not in kept:
            kept.append(item)
        if len(kept) >= limit:
            break
    return kept


def worst(severities) -> str:
    """The highest of ``severities`` (``low`` when empty)."""
    return max(severities, key=SEVERITIES.index, default=LOW)


def make_flag(name: str, *, source=(), severities=(), **more) -> Flag | None:
    """A flag when there is any evidence: ``source`` items plus the other evidence kinds
    given (empty ones dropped); None without any."""
    evidence = {}
    if source:
        evidence["source"] = items(list(source))
    for key, value in more.items():
        if value:
            evidence[key] = items(value) if isinstance(value, list) else value
    if not evidence:
        return None
    return Flag(name, evidence, worst(severities) if severities else HIGH)
