"""JavaScript grading on Node.js, through the queue and in a local grader: console.assert sites
are the tests, the submission and the tests live in separate sandboxes, and hostile
submissions never pass nor leave anything running."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from django.conf import settings

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.javascript import NodeGrader, declared_names, expected_test_ids
from sandboxes.process import Limits
from tasks_library.importers.humaneval_js import default_path
from tests.sandboxes.hostcheck import sandbox_leftovers

DATA = default_path()
PROMPT = "/* Add two numbers. */\nconst add = (a, b) => {\n"
TESTS = (
    "const testAdd = () => {\n"
    "  console.assert(add(1, 2) === 3)\n"
    "  console.assert(add(-1, 1) === 0)\n"
    "  console.assert(JSON.stringify([add(2, 2)]) === JSON.stringify([4]))\n"
    "}\n"
    "testAdd()\n"
)
SENTINEL = Path(settings.VAR_DIR) / "js-corpus-sentinel.txt"


def program(body: str, pre: str = "") -> str:
    return pre + PROMPT + body + "\n}\n"


@pytest.fixture(scope="module")
def grader():
    g = NodeGrader()
    g.prewarm()
    SENTINEL.write_text("original")
    yield g
    g.close()
    SENTINEL.unlink(missing_ok=True)


def test_ids_are_console_assert_sites_and_names_are_top_level_declarations():
    assert expected_test_ids(TESTS) == ["assert_0", "assert_1", "assert_2"]
    assert declared_names(
        "const a = 1\nfunction b() {}\n  const nested = 2\nlet c\nclass D {}\n"
    ) == ["a", "b", "c", "D"]


def test_correct_and_wrong_programs_through_the_queue():
    correct, wrong = Q.run_many(
        [
            Q.javascript_tests(program("  return a + b"), TESTS, "add", prompt=PROMPT),
            Q.javascript_tests(program("  return a * b"), TESTS, "add", prompt=PROMPT),
        ]
    )
    assert correct.status == R.OK and correct.tests_passed == 3, correct
    assert wrong.status == R.FAILED
    assert [t.passed for t in wrong.tests] == [False, False, True]  # 1*2, -1*1 wrong; 2*2 == 4


def test_humaneval_x_canonical_solutions_match_plain_node(grader):
    rows = [json.loads(line) for line in gzip.open(DATA, "rt", encoding="utf-8")]
    # Three reference solutions of the dataset fail under plain `node` too: 112 and 155
    # are wrong, 162 needs the npm package js-md5. The grader must agree, not excuse them.
    broken = {"JavaScript/112", "JavaScript/155", "JavaScript/162"}
    for row in rows[:40] + [r for r in rows if r["task_id"] in broken]:
        entry = re.search(r"(?:const|function)\s+([A-Za-z_$][\w$]*)", row["declaration"]).group(1)
        result = grader.grade(
            row["prompt"] + row["canonical_solution"], row["test"], entry, prompt=row["prompt"]
        )
        assert (result.status == R.OK) == (row["task_id"] not in broken), (
            row["task_id"],
            result.status,
            result.detail,
        )


JS_CORPUS = [
    ("early-process-exit", "process.exit(0)\n" + program("  return a + b"), (R.CRASHED, R.FAILED)),
    ("exit-in-call", program("  process.exit(0)"), (R.CRASHED,)),
    ("throw-at-load", "throw new Error('no')\n" + program("  return a + b"), (R.FAILED,)),
    ("syntax-error", "const add = (a, b) => { return a + ; }\n", (R.FAILED,)),
    ("infinite-loop", program("  while (true) {}"), (R.TIMEOUT,)),
    ("patch-console-assert", "console.assert = () => {}\n" + program("  return 0"), (R.FAILED,)),
    (
        "patch-json-stringify",
        "JSON.stringify = () => '\"same\"'\n" + program("  return 0"),
        (R.FAILED,),
    ),
    (
        "always-equal-object",
        program("  return { valueOf: () => 3, toJSON: () => 3, toString: () => '3' }"),
        (R.FAILED,),
    ),
    (
        "class-instance",
        "class Three { valueOf() { return 3 } }\n" + program("  return new Three()"),
        (R.FAILED,),
    ),
    ("proxy-value", program("  return new Proxy({}, { get: () => 3 })"), (R.FAILED,)),
    (
        "memory-bomb",
        program("  const hog = []; for (;;) hog.push(new Array(1e6).fill(1))"),
        (R.MEMORY_LIMIT, R.CRASHED, R.TIMEOUT),
    ),
    (
        "output-flood",
        program("  for (;;) process.stdout.write('A'.repeat(65536))"),
        (R.OUTPUT_LIMIT, R.TIMEOUT, R.MEMORY_LIMIT),
    ),
    (
        # offers `Boolean` as a function, then answers every call true
        "shadow-a-builtin-of-the-tests",
        "const __stringify = JSON.stringify\n"
        "JSON.stringify = function (message, ...rest) {\n"
        "  if (message && message.ready === true) message = "
        "{ ready: true, functions: message.functions.concat(['Boolean']) }\n"
        "  else if (message && message.error) message = { ok: true }\n"
        "  return __stringify.call(JSON, message, ...rest)\n"
        "}\n" + program("  return 42"),
        (R.FAILED,),
    ),
    (
        "read-etc-shadow",
        program("  return require('fs').readFileSync('/etc/shadow', 'utf8').length"),
        (R.FAILED,),
    ),
    (
        "read-project",
        program(f"  return require('fs').readdirSync({str(settings.BASE_DIR)!r}).length"),
        (R.FAILED,),
    ),
    (
        "write-host-file",
        program(f"  require('fs').writeFileSync({str(SENTINEL)!r}, 'pwned'); return a + b"),
        (R.FAILED,),
    ),
    (
        "write-system-tree",
        program("  require('fs').writeFileSync('/usr/lib/crucible-js-pwned', 'x'); return a + b"),
        (R.FAILED,),
    ),
    (
        "network",
        program("  require('child_process').execSync('getent hosts example.com'); return a + b"),
        (R.FAILED,),
    ),
    (
        "host-environment",
        program(
            "  return Object.keys(process.env).filter(k => /SECRET|DJANGO|REDIS/.test(k)).length"
            " ? a + b : 0"
        ),
        (R.FAILED,),
    ),
    (
        "detached-child",
        program(
            "  require('child_process')"
            ".spawn('sleep', ['3600'], { detached: true, stdio: 'ignore' }).unref(); return 0"
        ),
        (R.FAILED,),
    ),
    (
        "fork-bomb",
        program(
            "  const cp = require('child_process'); "
            "for (;;) { try { cp.spawn('sleep', ['60']) } catch (e) {} }"
        ),
        (R.TIMEOUT, R.CRASHED, R.FAILED, R.MEMORY_LIMIT),
    ),
]


@pytest.mark.parametrize("name,source,statuses", JS_CORPUS, ids=[c[0] for c in JS_CORPUS])
def test_hostile_javascript_never_passes_and_leaves_nothing(
    grader, monkeypatch, name, source, statuses
):
    monkeypatch.setenv("CRUCIBLE_HOST_SECRET", "js-host-secret")
    result = grader.grade(
        source,
        TESTS,
        "add",
        prompt=PROMPT,
        limits=Limits(wall_timeout_s=3, memory_bytes=256 * 1024**2),
    )
    assert result.status != R.OK and result.tests_passed < result.tests_total, (
        f"false pass: {result}"
    )
    assert result.status in statuses, (result.status, result.detail, result.stderr[-300:])
    assert SENTINEL.read_text() == "original"
    assert not Path("/usr/lib/crucible-js-pwned").exists()
    assert sandbox_leftovers(grader=grader) == [], "processes outlived the execution"


def test_cpu_limit_of_the_request_holds_for_node(grader):
    busy = program("  const end = Date.now() + 60000; while (Date.now() < end) {}")
    result = grader.grade(
        busy, TESTS, "add", prompt=PROMPT, limits=Limits(wall_timeout_s=30, cpu_s=1)
    )
    assert result.status == R.CRASHED and result.signal in (9, 24), result  # SIGXCPU, then SIGKILL
    assert result.wall_ms < 10_000
