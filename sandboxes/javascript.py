"""Grade JavaScript programs on Node.js: the Python grader's two-sandbox design, pre-warmed.

The submission runs in one sandbox (``harness/js_runner.js``), the tests in another
(``harness/js_check.js``); only plain data crosses between them, over a pair of
pipes with synchronous reads. Each ``console.assert(`` of the test source is one
test id (``assert_<k>``, in source order): the host rewrites the call so the driver
knows which site ran, and a site that never ran, or whose condition was false on
any run, fails. An early ``process.exit``, a thrown error or a crash leaves the
remaining ids unreported, hence failed.

Node cannot fork, so its trees are Python zygote trees (see ``harness/zygote.py``)
that ``execve`` ``node`` once isolated; like every tree they are booted ahead of
their job (``pairs.py``), so Node's start sits on a request's path only when
requests come faster than Node boots. Every execution gets new processes.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

from sandboxes import result as R
from sandboxes.environments.mount import HOST, Mount
from sandboxes.grading import _result
from sandboxes.interpreters import node_interpreter, python_interpreter
from sandboxes.pairs import WarmGrader
from sandboxes.process import Limits
from sandboxes.resident import Zygote, interpreter_bind_dirs

HARNESS_DIR = Path(__file__).parent / "harness"
ASSERT_CALL = re.compile(r"\bconsole\.assert\s*\(")
# Top-level declarations (no indentation): the functions the tests may call.
DECLARATION = re.compile(
    r"^(?:export\s+)?(?:async\s+)?(?:function\s*\*?\s*|const\s+|let\s+|var\s+|class\s+)([A-Za-z_$][\w$]*)",
    re.MULTILINE,
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
    source = (
        (HARNESS_DIR / "plaindata.js").read_text(encoding="utf-8")
        + "\n"
        + (HARNESS_DIR / name).read_text(encoding="utf-8")
    )
    return "(function () {\n" + source + "\n})();\n"


class NodeGrader(WarmGrader):
    """Grades JavaScript programs in a warm pair of zygotes whose trees exec ``node``."""

    def __init__(self, mount: Mount = HOST) -> None:
        """``mount``: the environment (its ``node_modules`` on ``NODE_PATH``); default the
        machine's Node.js alone."""
        self.node = node_interpreter()
        python = python_interpreter()
        binds = interpreter_bind_dirs(python) + interpreter_bind_dirs(self.node)
        self.runner = Zygote(python, "exec", {}, binds, extra_config=dict(mount.config))
        self.driver = Zygote(python, "exec", {}, binds, extra_config=dict(mount.config))
        self.spare = None
        self.heap_mb = Limits().memory_bytes // 2**20

    def exec_argv(self, role: str) -> list[str]:
        harness = "js_runner.js" if role == "runner" else "js_check.js"
        return [
            self.node,
            f"--max-old-space-size={self.heap_mb}",
            "--stack-size=4000",
            "-e",
            _harness(harness),
        ]

    def grade(
        self,
        program: str,
        test_source: str,
        entry_point: str,
        *,
        prompt: str = "",
        limits: Limits | None = None,
    ) -> R.ExecutionResult:
        """Execute ``program`` in one sandbox and the ``console.assert`` tests in another.

        Args:
            program: the full JavaScript source under test (prompt plus completion).
            test_source: HumanEval-X style tests that call the functions by name.
            entry_point: the function the tests call (helpers the prompt declares at
                its top level are callable too).
            prompt: the task's prompt, read for those helper names.
            limits: resource limits of this execution (the host lowers a pre-booted Node
                tree's CPU rlimit with ``prlimit``; Node cannot).

        Returns:
            An :class:`ExecutionResult` with one test per ``console.assert`` site.

        Raises:
            ZygoteDied: a resident sandbox died (the worker retries the request once).
        """
        limits = limits or Limits()
        rewritten, expected = rewrite_asserts(test_source)
        names = list(dict.fromkeys([entry_point, *declared_names(prompt)]))
        runner, driver = self.run_pair(
            {
                "program": program,
                "names": names,
                "files": {SOLUTION_FILE: program},
                "filename": SOLUTION_FILE,
            },
            {"tests": rewritten, "test_count": len(expected), "names": names},
            limits,
        )
        return _result(runner, driver, expected)
