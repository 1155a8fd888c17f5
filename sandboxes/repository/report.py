"""What a repository grading's answer says, with no I/O: SWE-bench's log parsing feeding its
report, here the runner's answer feeding a :class:`RepositoryResult`.

:func:`read_answer` takes the one frame the supervisor wrote at the end of stdout;
:func:`cross_check` names what voids an answer; :func:`grading_report` turns the run (the
session's execution and the answer) into the result of every FAIL_TO_PASS and PASS_TO_PASS id.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from sandboxes import result as R

STATUSES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "missing")
# Flags that void an answer: every id fails, whatever the answer said.
VOIDING = (
    "report_mismatch",
    "pytest_tampered",
    "foreign_plugin",
    "reads_hidden_tests",
    "refused_operation",
    "forged_report",
)


@dataclass
class RepositoryResult:
    """One repository grading.

    Attributes:
        status: ``ok`` (the suite ran and answered), ``failed`` (it did not answer: an early
            exit, a crash, an output flood, a voided answer), ``timeout``, ``infra_error``
            (the sandbox failed, or the environment has no pytest: never a reward).
        per_id: every FAIL_TO_PASS and PASS_TO_PASS id -> one of :data:`STATUSES`.
        fail_to_pass: the FAIL_TO_PASS ids among them (for :attr:`fail_to_pass_fraction`).
        detail: why, when not every id passed (collection errors, the failing ids...).
        stdout_tail: the end of pytest's own output (8 KiB).
        wall_ms: the grading's wall-clock milliseconds (the pytest run and the differential).
        flags: :data:`VOIDING` flags, ``incomplete``, ``collection_error``,
            ``output_flood``, ``patch_does_not_apply``, ``differential_mismatch``.
        environment: the build key the grading ran in.
        messages: id -> the first line of its first failure (pytest's crash message, e.g.
            ``AssertionError: assert 9 == 10``; 500 characters at most), for ids that failed
            or errored; written by the code under test's exceptions: untrusted text.
        differential: what the second line found (``sandboxes.repository.differential``):
            ``{"calls", "checked", "mismatches": [...], "not_applicable": why}``; empty when
            the grading had no reference to compare with.
    """

    status: str
    per_id: dict[str, str]
    fail_to_pass: tuple[str, ...] = ()
    detail: str = ""
    stdout_tail: str = ""
    wall_ms: float = 0.0
    flags: list[str] = field(default_factory=list)
    environment: str = ""
    messages: dict[str, str] = field(default_factory=dict)
    differential: dict = field(default_factory=dict)

    @property
    def resolved(self) -> bool:
        """SWE-bench's resolved: the suite answered and every id passed."""
        return (
            self.status == "ok"
            and bool(self.per_id)
            and all(s == "passed" for s in self.per_id.values())
        )

    @property
    def fraction(self) -> float:
        """Ids passed / ids, in [0, 1]."""
        if not self.per_id:
            return 0.0
        return sum(s == "passed" for s in self.per_id.values()) / len(self.per_id)

    @property
    def fail_to_pass_fraction(self) -> float:
        """FAIL_TO_PASS ids passed / FAIL_TO_PASS ids, 0 unless every PASS_TO_PASS id passed
        (the fix counts only when it broke nothing); 0 without FAIL_TO_PASS ids."""
        if self.status != "ok" or not self.fail_to_pass:
            return 0.0
        others = [s for i, s in self.per_id.items() if i not in self.fail_to_pass]
        if any(s != "passed" for s in others):
            return 0.0
        passed = sum(self.per_id.get(i) == "passed" for i in self.fail_to_pass)
        return passed / len(self.fail_to_pass)


def id_status(phases: Mapping[str, str] | None) -> str:
    """One id's status from its phases' outcomes (``{"setup"|"call"|"teardown": outcome}``,
    as the runner records them): ``passed`` only when all three passed."""
    if not phases:
        return "missing"
    setup, call, teardown = (phases.get(w) for w in ("setup", "call", "teardown"))
    if setup in ("skipped", "xfailed"):
        return "skipped" if setup == "skipped" else "xfailed"
    if setup != "passed":
        return "error" if setup == "failed" else "missing"
    if call in ("failed", "skipped", "xfailed", "xpassed"):
        return call
    if call != "passed":
        return "missing"
    if teardown == "passed":
        return "passed"
    return "error" if teardown == "failed" else "missing"


def read_answer(stdout: str, nonce: str) -> dict | None:
    """The supervisor's frame when it ends ``stdout``, else None."""
    end = f" {nonce} END"
    text = stdout.rstrip("\n")
    if not text.endswith(end):
        return None
    start = text.rfind(f"{nonce} BEGIN ")
    if start < 0:
        return None
    body = text[start + len(nonce) + len(" BEGIN ") : len(text) - len(end)]
    try:
        answer = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return answer if isinstance(answer, dict) else None


def statuses_of(answer: dict) -> dict[str, str]:
    """Every reported node id -> its status (:func:`id_status`)."""
    phases = answer.get("phases") or {}
    return {str(node): id_status(p) for node, p in phases.items() if isinstance(p, dict)}


def cross_check(answer: dict, statuses: Mapping[str, str]) -> list[str]:
    """The :data:`VOIDING` flags the answer earns (``statuses`` covers every reported item)."""
    flags = []
    if answer.get("mismatch"):
        flags.append("report_mismatch")
    # pytest's junit XML is a second tally of the same run: it must count as many passes
    # as the reporter, and at least as many test cases (it also counts collection errors,
    # skipped modules and internal errors as cases).
    junit = answer.get("junit")
    passed = sum(1 for s in statuses.values() if s in ("passed", "xpassed"))
    if junit is None:
        if statuses:
            flags.append("report_mismatch")
    elif junit.get("passed") != passed or int(junit.get("tests", 0)) < len(statuses):
        flags.append("report_mismatch")
    for key, flag in (
        ("tampered", "pytest_tampered"),
        ("foreign", "foreign_plugin"),
        ("hidden_reads", "reads_hidden_tests"),
        ("refused", "refused_operation"),
    ):
        if answer.get(key):
            flags.append(flag)
    return flags


def distrust(flags: list[str], answer: dict) -> str:
    """The detail of a voided answer: the flags and what earned them."""
    evidence = []
    for key in ("forged", "mismatch", "tampered", "foreign", "hidden_reads", "refused"):
        value = answer.get(key)
        evidence += [value] if isinstance(value, str) else list(value or [])[:5]
    if answer.get("junit") is not None and "report_mismatch" in flags:
        evidence.append(f"junit {answer['junit']}")
    return f"the report was not trustworthy ({', '.join(flags)}): {'; '.join(map(str, evidence))}"


def grading_report(
    ids: list[str],
    execution: R.ExecutionResult,
    answer: dict | None,
    *,
    fail_to_pass: tuple[str, ...],
    timeout_s: float,
    environment: str,
    wall_ms: float,
) -> RepositoryResult:
    """The :class:`RepositoryResult` of one pytest run (see the grading module for the rules)."""

    def void(status: str, detail: str, flags: list[str]) -> RepositoryResult:
        return RepositoryResult(
            status=status,
            per_id=dict.fromkeys(ids, "error"),
            fail_to_pass=fail_to_pass,
            detail=detail,
            stdout_tail=(answer or {}).get("log_tail", "") or execution.stdout[-8192:],
            wall_ms=wall_ms,
            flags=flags,
            environment=environment,
        )

    if execution.status == R.INFRA_ERROR:
        return void(R.INFRA_ERROR, execution.detail or "the grading session was lost", [])
    if execution.status == R.TIMEOUT:
        return void("timeout", f"pytest ran past {timeout_s:.0f} s", [])
    if execution.status == R.OUTPUT_LIMIT:
        return void("failed", "the run flooded its output", ["output_flood"])
    if answer is None:
        why = execution.detail or execution.stderr[-500:] or f"exit {execution.exit_code}"
        return void("failed", f"the suite did not answer ({why})", ["incomplete"])
    if answer.get("forged"):
        return void("failed", distrust(["forged_report"], answer), ["forged_report"])
    if not answer.get("ran"):
        if answer.get("no_pytest"):
            return void(
                R.INFRA_ERROR, f"the environment {environment or '(host)'} has no pytest", []
            )
        return void("failed", f"the runner failed: {answer.get('error', '')}", ["incomplete"])
    statuses = statuses_of(answer)
    flags = cross_check(answer, statuses)
    if flags:
        return void("failed", distrust(flags, answer), flags)
    per_id = {i: statuses.get(i, "missing") for i in ids}
    not_passed = [f"{i}: {s}" for i, s in per_id.items() if s != "passed"]
    detail = "; ".join(not_passed[:20])
    if answer.get("collect_errors"):
        detail += "; collection errors in " + ", ".join(sorted(answer["collect_errors"])[:10])
    return RepositoryResult(
        status="ok",
        per_id=per_id,
        fail_to_pass=fail_to_pass,
        detail=detail.strip("; "),
        stdout_tail=str(answer.get("log_tail", "")),
        wall_ms=wall_ms,
        flags=["collection_error"] if answer.get("collect_errors") else [],
        environment=environment,
        messages={i: str(m) for i, m in (answer.get("messages") or {}).items() if i in per_id},
    )
