"""Grade JavaScript programs on Node.js: the Python grader's two-sandbox design, pre-warmed.

The submission runs in one sandbox (``harness/js_runner.js``), the tests in another
(``harness/js_check.js``); only plain data crosses between them, over a pair of
pipes with synchronous reads. Each ``console.assert(`` of the test source is one
test id (``assert_<k>``, in source order): the host rewrites the call so the driver
knows which site ran, and a site that never ran, or whose condition was false on
any run, fails. An early ``process.exit``, a thrown error or a crash leaves the
remaining ids unreported, hence failed.

Node cannot fork, so the pool is pre-warmed instead of forked: a warm Python zygote
(see ``harness/zygote.py``) forks a fresh isolated tree that ``execve``s ``node``,
which boots and then blocks reading its job. The next pair boots while the host
hands back the current result, so no interpreter start sits on a request's path
unless requests come faster than Node boots. Every execution gets new processes.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from sandboxes import result as R
from sandboxes.grading import _result
from sandboxes.process import Limits
from sandboxes.resident import Tree, Zygote, ZygoteDied, interpreter_bind_dirs, watch
from sandboxes.runtimes import node_interpreter, python_interpreter

HARNESS_DIR = Path(__file__).parent / "harness"
ASSERT_CALL = re.compile(r"\bconsole\.assert\s*\(")
# Top-level declarations (no indentation): the functions the tests may call.
DECLARATION = re.compile(
    r"^(?:export\s+)?(?:async\s+)?(?:function\s*\*?\s*|const\s+|let\s+|var\s+|class\s+)([A-Za-z_$][\w$]*)", re.MULTILINE
)
SOLUTION_FILE = "solution.js"


def rewrite_asserts(test_source: str) -> tuple[str, list[str]]:
    """Number each ``console.assert(`` call site; returns the rewritten source and the ids."""
    counter = itertools.count()
    rewritten = ASSERT_CALL.sub(lambda _m: f"__crucibleAssert({next(counter)}, ", test_source)
    count = next(counter)
    return rewritten, [f"assert_{k}" for k in range(count)]


def expected_test_ids(test_source: str) -> list[str]:
    """The ids of the tests in a JavaScript test source: one per ``console.assert`` site."""
    return rewrite_asserts(test_source)[1]


def declared_names(source: str) -> list[str]:
    """Names a JavaScript source declares at its top level, in order, without repeats."""
    return list(dict.fromkeys(DECLARATION.findall(source)))


@functools.lru_cache(maxsize=2)
def _harness(name: str) -> str:
    """A harness program with the codec in front, wrapped in a function so none of its
    names is global: a submission may declare ``encode`` or ``main`` itself."""
    source = (HARNESS_DIR / "plaindata.js").read_text(encoding="utf-8") + "\n" + (HARNESS_DIR / name).read_text(encoding="utf-8")
    return "(function () {\n" + source + "\n})();\n"


@dataclass
class _Warm:
    """A booted (or booting) node process waiting for its job on ``job_fd``."""

    zygote: Zygote
    pid: int
    job_fd: int
    pipes: dict[str, int]


class NodeGrader:
    """A warm pair of zygotes for JavaScript and the next pre-booted pair of trees.

    Not thread-safe: one grader per worker thread.
    """

    def __init__(self) -> None:
        self.node = node_interpreter()
        python = python_interpreter()
        binds = interpreter_bind_dirs(python) + interpreter_bind_dirs(self.node)
        self.runner = Zygote(python, "exec", {}, binds)
        self.driver = Zygote(python, "exec", {}, binds)
        self.spare: tuple[_Warm, _Warm] | None = None
        self.heap_mb = Limits().memory_bytes // 2**20

    def ensure_started(self) -> None:
        for zygote in (self.runner, self.driver):
            if not zygote.alive:
                self._drop_spare()
                zygote.stop()
                zygote.start()

    def close(self) -> None:
        self._drop_spare()
        self.runner.stop()
        self.driver.stop()

    def prewarm(self) -> None:
        """Boot the next pair now (the worker calls this once at start)."""
        self.ensure_started()
        if self.spare is None:
            self.spare = self._boot_pair()

    def _drop_spare(self) -> None:
        if self.spare is not None:
            for warm in self.spare:
                os.close(warm.job_fd)
                for fd in warm.pipes.values():
                    os.close(fd)
            self.spare = None

    def _argv(self, harness: str) -> list[str]:
        return [self.node, f"--max-old-space-size={self.heap_mb}", "--stack-size=4000", "-e", _harness(harness)]

    def _boot_pair(self) -> tuple[_Warm, _Warm]:
        limits = Limits()
        names = ("request", "reply", "r_out", "r_err", "r_exit", "r_job", "d_out", "d_err", "d_exit", "d_job", "results")
        p = {name: os.pipe() for name in names}
        sent = set()
        try:
            runner_pid = self.runner.start_tree(
                files={}, spec={"fd_order": ["job", "request", "reply"]}, limits=limits, exec_argv=self._argv("js_runner.js"),
                fds={"stdout": p["r_out"][1], "stderr": p["r_err"][1], "exit": p["r_exit"][1], "job": p["r_job"][0],
                     "request": p["request"][0], "reply": p["reply"][1]},
            )
            sent |= {p[n][i] for n, i in (("r_out", 1), ("r_err", 1), ("r_exit", 1), ("r_job", 0), ("request", 0), ("reply", 1))}
            driver_pid = self.driver.start_tree(
                files={}, spec={"fd_order": ["job", "request", "reply", "results"]}, limits=limits,
                exec_argv=self._argv("js_check.js"),
                fds={"stdout": p["d_out"][1], "stderr": p["d_err"][1], "exit": p["d_exit"][1], "job": p["d_job"][0],
                     "request": p["request"][1], "reply": p["reply"][0], "results": p["results"][1]},
            )
        except BaseException:
            for fd in (fd for pair in p.values() for fd in pair):
                if fd not in sent:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            raise
        runner = _Warm(self.runner, runner_pid, p["r_job"][1],
                       {"stdout": p["r_out"][0], "stderr": p["r_err"][0], "exit": p["r_exit"][0]})
        driver = _Warm(self.driver, driver_pid, p["d_job"][1],
                       {"stdout": p["d_out"][0], "stderr": p["d_err"][0], "exit": p["d_exit"][0], "results": p["results"][0]})
        return runner, driver

    def grade(self, program: str, test_source: str, entry_point: str, *, prompt: str = "",
              limits: Limits | None = None) -> R.ExecutionResult:
        """Execute ``program`` in one sandbox and the ``console.assert`` tests in another.

        Args:
            program: the full JavaScript source under test (prompt plus completion).
            test_source: HumanEval-X style tests that call the functions by name.
            entry_point: the function the tests call (helpers the prompt declares at
                its top level are callable too).
            prompt: the task's prompt, read for those helper names.
            limits: wall clock, memory, processes and output of this execution (the CPU
                rlimit of a pre-booted tree is the default ``Limits().cpu_s``).

        Returns:
            An :class:`ExecutionResult` with one test per ``console.assert`` site.

        Raises:
            ZygoteDied: a resident sandbox died (the worker retries the request once).
        """
        limits = limits or Limits()
        rewritten, expected = rewrite_asserts(test_source)
        names = list(dict.fromkeys([entry_point, *declared_names(prompt)]))
        self.ensure_started()
        runner, driver = self.spare or self._boot_pair()
        self.spare = None
        for zygote in (self.runner, self.driver):
            zygote.prepare_cgroup(limits)
        jobs = [
            (runner.job_fd, {"program": program, "names": names, "files": {SOLUTION_FILE: program}, "filename": SOLUTION_FILE}),
            (driver.job_fd, {"tests": rewritten, "test_count": len(expected)}),
        ]
        writers = [threading.Thread(target=_write_job, args=(fd, job), daemon=True) for fd, job in jobs]
        for writer in writers:  # a thread each: a job over a pipe's 64 KiB waits for node to read it
            writer.start()
        outcomes = watch(
            [Tree(runner.zygote, runner.pid, runner.pipes, limits), Tree(driver.zygote, driver.pid, driver.pipes, limits, kill_on_output=False)],
            deadline_s=limits.wall_timeout_s,
        )
        for writer in writers:
            writer.join(timeout=5)
        for zygote in (self.runner, self.driver):
            if not zygote.alive:
                raise ZygoteDied(f"sandbox process for node ({'runner' if zygote is self.runner else 'driver'}) died")
        self.spare = self._boot_pair()
        return _result(outcomes[0], outcomes[1], expected)


def _write_job(fd: int, job: dict) -> None:
    data = json.dumps(job).encode()
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass  # the tree died before reading its job; its outcome says how
    finally:
        os.close(fd)
