"""The structured result of one sandbox execution."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Named outcomes. ``infra_error`` means the sandbox failed, not the submission:
# callers retry it and never score it as a policy failure.
OK = "ok"
FAILED = "failed"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
CRASHED = "crashed"
INFRA_ERROR = "infra_error"
STATUSES = (OK, FAILED, TIMEOUT, MEMORY_LIMIT, OUTPUT_LIMIT, CRASHED, INFRA_ERROR)
AUDIT_MAX_EVENTS = 64  # as the runner's harness caps them
AUDIT_FORGED = "crucible.audit_forged"
AUDIT_LOST = "crucible.audit_lost"


@dataclass
class TestResult:
    """One expected test: ``passed`` is False unless the harness reported a pass.

    ``score`` is a custom checker's partial credit in [0, 1]; None for pass/fail tests.
    ``output`` is, for a probe call, the repr of what the program returned (4,000
    characters at most).
    """

    id: str
    passed: bool
    error: str = ""
    score: float | None = None
    output: str = ""


@dataclass
class ExecutionResult:
    """What one execution did.

    Attributes:
        status: one of :data:`STATUSES`.
        exit_code: the process's exit status, or None when it was killed by a signal.
        signal: the number of the signal that ended it, or None.
        stdout, stderr: the first ``output_cap_bytes`` of each stream, decoded as UTF-8
            with replacement.
        truncated: True when either stream was longer than the cap.
        wall_ms: wall-clock milliseconds from spawn to exit.
        cpu_ms: user plus system CPU milliseconds of the whole process tree.
        peak_memory_bytes: with a cgroup, the peak memory charged to the whole tree
            (resident plus page cache); with rlimits only, the largest resident set
            of one process in it.
        tests: one entry per expected test id, in order.
        enforcement: ``cgroup-v1`` when a per-execution cgroup held memory and process
            count, ``rlimit`` when rlimits alone did.
        readonly_root: how the sandbox made its root read-only: ``mount_setattr`` (one
            recursive syscall), ``remount`` (one ``MS_REMOUNT`` per mount, checked, where
            the kernel lacks it: gVisor); empty where no sandbox ran.
        environment: the build key of the environment it ran in (its packages' hash, else
            its root's, else ``host-<runtime>``, see ``sandboxes.environments``); empty where no
            worker ran it.
        audit: what the submission attempted, recorded inside its sandbox by an audit hook
            (Python; see ``harness/python_runner.py``): ``{"event", "args"}`` each, the
            event's CPython audit name and a short repr of its arguments, at most
            :data:`AUDIT_MAX_EVENTS` of them in order, plus the host's own findings about the
            channel (``crucible.audit_forged``: lines without the execution's token;
            ``crucible.audit_lost``: the process ended by itself without the harness's end
            line: the channel was closed or redirected, or the process cut short).
        audit_count: how many events were recorded in all (a flood keeps counting past the
            list's cap); 0 where nothing was recorded or the runtime has no audit (Node.js).
        call_cpu_ms: CPU milliseconds the submission spent inside the tests' calls (the
            calling thread's clock, read by its harness around each call; loading, the harness
            and the pipes left out): the program's own cost. 0.0 where unknown (Node.js, or
            the run did not end normally).
    """

    status: str
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    peak_memory_bytes: int = 0
    tests: list[TestResult] = field(default_factory=list)
    detail: str = ""
    enforcement: str = "rlimit"
    audit: list[dict] = field(default_factory=list)
    audit_count: int = 0
    call_cpu_ms: float = 0.0
    readonly_root: str = ""
    environment: str = ""

    @property
    def tests_passed(self) -> int:
        return sum(1 for t in self.tests if t.passed)

    @property
    def tests_total(self) -> int:
        return len(self.tests)

    @property
    def score(self) -> float:
        """The correctness score in [0, 1]: the mean over expected tests of each test's
        score (a checker's partial credit) or 1/0 for passed/failed; 0 without tests."""
        if not self.tests:
            return 0.0
        return sum(t.score if t.score is not None else float(t.passed) for t in self.tests) / len(
            self.tests
        )

    @property
    def passed(self) -> bool:
        """True only when every expected test reported a pass and the run ended normally."""
        return self.status == OK

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ExecutionResult:
        """The inverse of :meth:`to_dict` (a result that crossed the queue)."""
        fields = dict(data)
        fields["tests"] = [TestResult(**t) for t in fields.get("tests", [])]
        fields["audit"] = [dict(event) for event in fields.get("audit", [])]
        return cls(**fields)
