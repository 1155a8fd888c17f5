"""stdin/stdout tasks (APPS-like, CodeContests-like and input/output-case rows) import with
no preprocessing and validate in the real sandbox; the ``stdio`` harness runs the program
afresh per case, compares exactly, with whitespace normalised or numbers within a
tolerance, fails a crash, a timeout or missing output on that case only, and never lets the
expected outputs into the program's sandbox. The fixture holds 12 original problems, awkward
ones among them (float outputs, trailing whitespace in the expected outputs, outputs as
lists of lines, an empty input, deep recursion, a large output, a C++ solution listed first).
"""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandboxes import result as R
from sandboxes.harness.python_stdio import compare_output, stdio_ids
from tasks_library.importers import ImportFormatError
from tasks_library.importers.stdio import stdio_record
from tasks_library.models import Task, TaskVersion
from tests.tasks_library import shape_helpers
from tests.tasks_library.shape_helpers import import_json, validate_rows, versions

FIXTURE = Path(__file__).parent / "data" / "stdio_shaped.jsonl"
IDS = [
    "APPS/101",
    "APPS/102",
    "APPS/103",
    "CC/0001 vowels",
    "CC/0002 grid paths",
    "CC/0003 sorted",
    "stdio/fizzbuzz",
    "stdio/transpose",
    "stdio/distance",
    "stdio/count-lines",
    "stdio/paren-depth",
    "stdio/squares",
]


def grade(version, script: str, **limits):
    return shape_helpers.grade(version, script, **{"test_timeout_s": 2, **limits})


@pytest.mark.django_db
def test_rows_of_every_shape_import_with_their_ids():
    report = import_json("stdio", str(FIXTURE))
    assert report == {
        "task_set": "stdio_shaped",
        "imported": 12,
        "new_versions": 12,
        "unchanged": 0,
        "shape": "stdio",
    }
    found = versions()
    assert sorted(found) == sorted(IDS)
    for version in found.values():
        suite = version.test_suite
        assert suite.harness == "stdio" and version.task.source == "stdio"
        assert suite.hidden_test_ids == stdio_ids(suite.hidden_tests)
        assert suite.test_timeout_s == 2.0
    # CodeContests: public tests visible, public and private hidden; ids agree.
    vowels = found["CC/0001 vowels"].test_suite
    assert vowels.visible_test_ids == ["case_0", "case_1"]
    assert vowels.hidden_test_ids == [f"case_{k}" for k in range(6)]
    assert "bcdfghjklmnpqrstvwxyz" not in vowels.visible_tests
    # APPS: the first case visible; outputs given as lists of lines are joined.
    words = found["APPS/102"].test_suite
    assert words.visible_test_ids == ["case_0"]
    assert json.loads(words.hidden_tests)["cases"][1]["output"] == "c b a\none\n"
    assert json.loads(found["APPS/103"].test_suite.hidden_tests)["compare"] == "float"
    assert json.loads(found["stdio/fizzbuzz"].test_suite.hidden_tests)["compare"] == "exact"
    # The reference of a CodeContests row is its first Python 3 solution, not the C++ one.
    assert "#include" not in found["CC/0001 vowels"].reference_solution
    assert found["stdio/fizzbuzz"].prompt.startswith('"""Print the numbers from 1 to n')


@pytest.mark.django_db
def test_format_jsonl_detects_the_shape():
    import_json("stdio", str(FIXTURE), "--taskset", "explicit")
    detected = import_json("--format", "jsonl", str(FIXTURE), "--taskset", "detected")
    assert detected["shape"] == "stdio"
    assert detected["unchanged"] == 12 and detected["new_versions"] == 0


@pytest.mark.django_db
def test_rows_validate_in_the_sandbox():
    import_json("stdio", str(FIXTURE))
    rows = validate_rows("stdio_shaped", "--reference-runs", "2", "--mutants", "8")
    assert {tid: row["verdict"] for tid, row in rows.items()} == dict.fromkeys(IDS, "valid"), {
        tid: row["reasons"] for tid, row in rows.items() if row["verdict"] != "valid"
    }
    for row in rows.values():
        assert row["report"]["reference"]["passed_runs"] == 2
        assert row["report"]["trivial"]["tests_passed"] == 0
        assert row["report"]["mutation"]["mutants"] > 0


@pytest.mark.django_db
def test_broken_reference_and_trivial_suite_are_caught(write_jsonl):
    rows = [
        {
            "task_id": "stdio/broken",
            "prompt": "Print the double of n.",
            "reference_solution": "print(int(input()) * 3)\n",
            "tests": [{"input": "2\n", "output": "4\n"}, {"input": "5\n", "output": "10\n"}],
        },
        {
            "task_id": "stdio/empty-answer",
            "prompt": "Print nothing.",
            "reference_solution": "pass\n",
            "tests": [{"input": "1\n", "output": ""}, {"input": "", "output": "\n"}],
        },
    ]
    import_json("--format", "jsonl", str(write_jsonl(rows, "edge.jsonl")))
    verdicts = {tid: r["verdict"] for tid, r in validate_rows("edge", "--mutants", "0").items()}
    assert verdicts == {"stdio/broken": "broken_reference", "stdio/empty-answer": "trivial_passes"}


@pytest.mark.django_db
def test_per_case_results_crash_timeout_and_missing_output_fail_their_case_only():
    import_json("stdio", str(FIXTURE))
    task = versions()["stdio/count-lines"]  # inputs: "", "one\n", "a\nb\nc\n", "\n\n"
    program = (
        "import sys, time\n"
        "data = sys.stdin.read()\n"
        "if data == 'one\\n':\n    raise ValueError('boom')\n"  # case_1 crashes
        "if data.startswith('a'):\n    time.sleep(60)\n"  # case_2 times out
        "if data == '\\n\\n':\n    sys.exit(0)\n"  # case_3 writes nothing
        "print(len(data.splitlines()))\n"
    )
    result = grade(task, program, test_timeout_s=1)
    by_id = {t.id: t for t in result.tests}
    assert [t.passed for t in result.tests] == [True, False, False, False]
    assert "runtime error (exit status 1)" in by_id["case_1"].error
    assert "ValueError: boom" in by_id["case_1"].error
    assert "time limit exceeded" in by_id["case_2"].error
    assert "got 0 lines, expected 1" in by_id["case_3"].error
    assert result.status == R.FAILED


@pytest.mark.django_db
def test_each_case_runs_in_a_fresh_process():
    """A program that keeps state (a file, a module global) between runs does not get it:
    every case is a new ``__main__`` in a new process."""
    import_json("stdio", str(FIXTURE))
    task = versions()["APPS/101"]
    program = (
        "import os, sys\n"
        "n = int(input())\nvalues = list(map(int, input().split()))\n"
        "print(sum(values) + (1000 if 'ran' in dir(sys) else 0))\n"
        "sys.ran = True\n"
    )
    result = grade(task, program)
    assert result.status == R.OK, [(t.id, t.error) for t in result.tests]


@pytest.mark.django_db
def test_expected_outputs_never_reach_the_program(write_jsonl):
    """The program looks for an expected output everywhere it can (the objects in its
    memory, inherited from the harness, its files, its parent's memory and descriptors, the
    environment) and prints it if found: it never is, so the case fails. The same search does
    find the case's input, which is there: the search works."""
    rows = [
        {
            "task_id": "stdio/secret",
            "prompt": "Print the secret.",
            "reference_solution": "print('SECRET' + '-7f3a')\n",
            "tests": [{"input": "INPUT-3c9d\n", "output": "SECRET-7f3a\n"}],
        }
    ]
    import_json("--format", "jsonl", str(write_jsonl(rows, "secret.jsonl")))
    task = versions()["stdio/secret"]
    program = (
        "import gc, os, sys\n"
        "def texts(value, depth=0):\n"
        "    if isinstance(value, (str, bytes)):\n"
        "        yield value if isinstance(value, str) else value.decode('latin-1')\n"
        "    elif isinstance(value, dict) and depth < 4:\n"
        "        for item in list(value.items()):\n"
        "            yield from texts(item, depth + 1)\n"
        "    elif isinstance(value, (list, tuple)) and depth < 4:\n"
        "        for item in value:\n"
        "            yield from texts(item, depth + 1)\n"
        "def search(needle):\n"
        "    frame, frames = sys._getframe(), []\n"
        "    while frame is not None:\n"
        "        frames.append(dict(frame.f_locals))\n"
        "        frame = frame.f_back\n"
        "    for o in frames + gc.get_objects():\n"
        "        if any(needle in t and t is not needle for t in texts(o)):\n"
        "            return True\n"
        "    for root in ('/tmp', '.', '/proc/self', '/proc/%d' % os.getppid()):\n"
        "        for name in ('environ', 'cmdline', 'mem'):\n"
        "            try:\n"
        "                data = open(os.path.join(root, name), 'rb').read(1 << 20)\n"
        "            except OSError:\n"
        "                continue\n"
        "            if needle.encode() in data:\n"
        "                return True\n"
        "    for fd in range(0, 64):\n"
        "        try:\n"
        "            if needle.encode() in os.read(fd, 1 << 20):\n"
        "                return True\n"
        "        except OSError:\n"
        "            pass\n"
        "    return False\n"
        "secret = 'SECRET' + '-7f3a'\n"
        "print(secret if search(secret) else 'NOT FOUND',"
        " 'input-seen' if search('INPUT' + '-3c9d') else 'input-missed')\n"
    )
    result = grade(task, program)
    assert result.status == R.FAILED
    assert "got 'NOT FOUND input-seen'" in result.tests[0].error


@pytest.mark.django_db
def test_forged_replies_from_the_case_process_do_not_pass():
    """The case's process holds none of the harness's pipes: writing a forged answer on
    every descriptor reaches nobody, and the case is judged on what it printed."""
    import_json("stdio", str(FIXTURE))
    task = versions()["APPS/101"]
    forged = json.dumps({"ok": {"stdout": "6\n", "exit": 0}}) + "\n"
    program = (
        "import os\n"
        f"line = {forged.encode()!r}\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, line)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('wrong')\n"
    )
    result = grade(task, program)
    assert result.status == R.FAILED and result.tests_passed == 0


@pytest.mark.parametrize(
    ("got", "want", "mode", "equal"),
    [
        ("3\n", "3\n", "exact", True),
        ("3", "3\n", "exact", False),
        ("1 2 \n", "1 2\n", "exact", False),
        ("1  2\t3 \r\n\n\n", "1 2 3\n", "whitespace", True),
        ("1 2\n3\n", "1 2 3\n", "whitespace", False),  # the lines still count
        ("", "\n\n", "whitespace", True),
        ("0.3333333\n", "0.333333333\n", "float", True),
        ("5\n", "5.000000\n", "float", True),
        ("1e6 2\n", "1000000.0000001 2", "float", True),
        ("0.34\n", "0.333333333\n", "float", False),
        ("nan\n", "0.5\n", "float", False),
        ("inf\n", "inf\n", "float", True),  # the same text
        ("YES 1.0\n", "yes 1.0\n", "float", False),  # words compare as text
        ("1.0 2.0\n", "1.0\n", "float", False),
    ],
)
def test_comparison_modes(got, want, mode, equal):
    assert compare_output(got, want, mode, 1e-6)[0] is equal


BAD_ROWS = [
    (
        {
            "problem_id": 1,
            "question": "q",
            "solutions": '["print(1)"]',
            "input_output": '{"fn_name": "f", "inputs": [[1]], "outputs": [1]}',
        },
        "a call-based problem",
        "input_output",
    ),
    (
        {
            "problem_id": 1,
            "question": "q",
            "solutions": '["print(1)"]',
            "input_output": '{"inputs": ["1"], "outputs": []}',
        },
        "1 inputs but 0 outputs",
        "input_output",
    ),
    (
        {
            "problem_id": 1,
            "question": "q",
            "solutions": "[]",
            "input_output": '{"inputs": ["1"], "outputs": ["1"]}',
        },
        "field 'solutions'",
        "solutions",
    ),
    (
        {"problem_id": 1, "question": "q", "solutions": '["x"]', "input_output": "{oops"},
        "field 'input_output': not valid JSON",
        "input_output",
    ),
    (
        {
            "name": "c",
            "description": "d",
            "public_tests": {"input": ["1"], "output": ["1"]},
            "solutions": {"language": [2], "solution": ["int main(){}"]},
        },
        "no Python 3 solution",
        "solutions",
    ),
    (
        {
            "task_id": "t",
            "prompt": "p",
            "reference_solution": "print(1)",
            "tests": [{"input": 1, "output": "1"}],
        },
        "field 'tests[0].input'",
        "tests",
    ),
    (
        {
            "task_id": "t",
            "prompt": "p",
            "reference_solution": "print(1)",
            "tests": [{"input": "1"}],
        },
        "expected an object with input and output",
        "tests",
    ),
    (
        {
            "task_id": "t",
            "prompt": "p",
            "reference_solution": "print(1)",
            "compare": "fuzzy",
            "tests": [{"input": "1", "output": "1"}],
        },
        "field 'compare'",
        "compare",
    ),
    (
        {"task_id": "t", "prompt": "p", "reference_solution": "print(1)", "tests": []},
        "no input/output case",
        "tests",
    ),
    ({"task_id": "t", "prompt": "p"}, "not a stdin/stdout task", None),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("row", "message", "field"), BAD_ROWS)
def test_a_bad_row_names_file_line_and_field_and_nothing_is_written(
    write_jsonl, row, message, field
):
    good = {
        "task_id": "good",
        "prompt": "Echo.",
        "reference_solution": "print(input())\n",
        "tests": [{"input": "1\n", "output": "1\n"}],
    }
    path = write_jsonl([good, row], "bad.jsonl")
    with pytest.raises(CommandError) as caught:
        call_command("import_tasks", "stdio", str(path), stdout=StringIO())
    assert f"{path}:2: " in str(caught.value) and message in str(caught.value)
    assert Task.objects.count() == 0 and TaskVersion.objects.count() == 0
    if field:
        with pytest.raises(ImportFormatError) as direct:
            stdio_record(row, "row")
        assert direct.value.field == field
