"""A project's test suite run in a sandbox session, with a result per pytest node id.

The generator runs the suite hundreds of times on one project (the pristine tree, then each
candidate bug on the test modules that cover it, then the kept ones on the whole suite), so it
keeps one session (``sandboxes.sessions``) holding the pristine project and, per run, writes
the changed modules, runs pytest and writes the pristine text back. Grading never happens
here: a task's grading runs in a fresh sandbox (``sandboxes/repository``).

Per-id results are read from pytest's ``-rA`` summary, each line matched against the ids
``--collect-only`` listed (a parametrised id may hold `` - ``, which the summary also uses
to start a message). Bytecode is not written (``PYTHONDONTWRITEBYTECODE``): a mutant of the
same size written within the same second as the original would otherwise be served from a
stale ``.pyc``. The project is untrusted code from an index: it only ever runs in the sandbox.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from sandboxes import result as R
from sandboxes.sessions import SessionLimits, Workspace, open_session

OUTCOMES = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
}
OUTPUT_CAP = 4 * 1024 * 1024
MESSAGE_CHARS = 300
# pytest's exit codes that mean the suite ran (0 all passed, 1 some failed); 5: none collected.
RAN = (0, 1)


@dataclass
class SuiteRun:
    """One run of the suite (or of some of its modules).

    Attributes:
        status: ``ok`` (pytest ran the tests), ``failed`` (it could not: a collection or usage
            error, exit code in ``detail``), ``timeout``, ``infra_error`` (the sandbox).
        results: node id -> ``passed``, ``failed``, ``error``, ``xfailed``, ``xpassed``
            (skipped tests are absent: pytest's summary does not name them).
        messages: node id -> the first line of its failure (``AssertionError: assert 1 == 2``).
        seconds: wall time of the run; detail: what went wrong, with the output's tail.
    """

    status: str
    results: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str = ""

    def passed(self) -> set[str]:
        return {i for i, outcome in self.results.items() if outcome == "passed"}


def pytest_command(pythonpath: str, targets: Iterable[str] = (), *, collect: bool = False) -> str:
    """The shell command that runs pytest on ``targets`` (all tests when empty) in the
    workspace, importing the project from ``pythonpath`` (``.`` or ``src``)."""
    argv = ["python3", "-m", "pytest", "-p", "no:cacheprovider", "--color=no"]
    argv += ["-o", f"pythonpath={pythonpath}", "-o", "console_output_style=classic"]
    argv += ["--collect-only", "-q"] if collect else ["-q", "-rA", "--tb=no"]
    return shlex.join([*argv, *targets])


def parse_summary(output: str, known: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(results, messages)`` from pytest's ``-rA`` short summary in ``output``.

    Each line ``OUTCOME ID[ - MESSAGE]``: the id is the longest known id the rest starts with,
    else the text before the first `` - ``.
    """
    results: dict[str, str] = {}
    messages: dict[str, str] = {}
    in_summary = False
    for line in output.splitlines():
        if "short test summary info" in line:
            in_summary = True
            continue
        if not in_summary:
            continue
        word, _, rest = line.partition(" ")
        outcome = OUTCOMES.get(word)
        if outcome is None:
            continue
        node = max((k for k in _prefixes(rest, known)), key=len, default=None)
        if node is None:
            node = rest.split(" - ", 1)[0]
        message = rest[len(node) :].removeprefix(" - ").strip()
        results[node] = outcome
        if message and outcome in ("failed", "error"):
            messages[node] = message[:MESSAGE_CHARS]
    return results, messages


def _prefixes(rest: str, known: set[str]) -> Iterable[str]:
    if rest in known:
        yield rest
    head = rest
    while " - " in head:
        head = head.rsplit(" - ", 1)[0]
        if head in known:
            yield head


class ProjectSuite:
    """One sandbox session holding a project's pristine files; :meth:`run` runs its suite
    with some modules changed. A context manager (closes the session).

    Args:
        files: the pristine project, ``{path: bytes}``.
        environment: the built environment (``environment_request``), with pytest in it.
        pythonpath: ``.`` or ``src`` (``Project.pythonpath``).

    Raises:
        SessionLost: no sandbox session slot could open it.
    """

    def __init__(self, files: dict[str, bytes], *, environment: dict, pythonpath: str) -> None:
        self.files = files
        self.pythonpath = pythonpath
        limits = SessionLimits(workspace_bytes=512 * 1024 * 1024, idle_timeout_s=1800.0)
        self.session = open_session(
            Workspace.from_files(files), environment=environment, limits=limits
        )
        self.known: set[str] = set()

    def __enter__(self) -> ProjectSuite:
        return self

    def __exit__(self, *_exc) -> None:
        self.session.close()

    def _exec(self, command: str, timeout_s: float) -> R.ExecutionResult:
        env = {"PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "400", "PYTHONHASHSEED": "0"}
        return self.session.exec(command, timeout_s=timeout_s, env=env, output_cap_bytes=OUTPUT_CAP)

    def collect(self, *, timeout_s: float = 300.0) -> list[str]:
        """Every test id pytest collects on the pristine project, in its order (also kept for
        reading the summaries of later runs).

        Raises:
            RuntimeError: collection failed (the output's tail quoted).
        """
        result = self._exec(pytest_command(self.pythonpath, collect=True), timeout_s)
        ids = [line for line in result.stdout.splitlines() if "::" in line and " " not in line[:1]]
        if result.status != R.OK or not ids:
            tail = (result.stdout + result.stderr)[-1500:]
            raise RuntimeError(f"pytest could not collect the suite ({result.status}): {tail}")
        self.known = set(ids)
        return ids

    def run(
        self,
        *,
        changed: dict[str, bytes] | None = None,
        targets: Iterable[str] = (),
        timeout_s: float = 300.0,
    ) -> SuiteRun:
        """Run pytest on ``targets`` (test modules or ids; all when empty) with ``changed``
        (``{path: bytes}``) written over the pristine files, which are put back afterwards."""
        changed = changed or {}
        for path, content in changed.items():
            self.session.write(path, content)
        started = time.monotonic()
        try:
            result = self._exec(pytest_command(self.pythonpath, targets), timeout_s)
        finally:
            for path in changed:
                self.session.write(path, self.files[path])
        seconds = time.monotonic() - started
        tail = (result.stdout[-1200:] + result.stderr[-800:]).strip()
        if result.status == R.INFRA_ERROR:
            return SuiteRun("infra_error", seconds=seconds, detail=result.detail)
        if result.status == R.TIMEOUT:
            return SuiteRun("timeout", seconds=seconds, detail=f"over {timeout_s:.0f} s")
        if result.status not in (R.OK, R.FAILED) or result.exit_code not in RAN:
            detail = f"pytest did not run the tests ({result.status}, exit {result.exit_code})"
            return SuiteRun("failed", seconds=seconds, detail=f"{detail}: {tail}")
        results, messages = parse_summary(result.stdout, self.known)
        return SuiteRun("ok", results, messages, seconds, "")
