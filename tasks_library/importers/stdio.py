"""Read standard-input/standard-output tasks (the shape of competitive-programming sets used
for RL on code) from JSONL, in any of three row shapes, with no preprocessing:

- **APPS-like**: ``{"problem_id": 12, "question": "...", "solutions": "[\\"...\\"]",
  "input_output": "{\\"inputs\\": [...], \\"outputs\\": [...]}"}``: ``solutions`` and
  ``input_output`` as JSON text (as APPS ships them) or as a list and an object; an input
  or output that is a list of lines is joined with newlines. Task id ``APPS/<problem_id>``
  (a text ``task_id`` or ``id`` wins). A call-based problem (``fn_name``) is refused: it is
  a function task.
- **CodeContests-like**: ``{"name": "1548_A. ...", "description": "...",
  "public_tests": {"input": [...], "output": [...]}, "private_tests": {...},
  "solutions": {"language": [3, ...], "solution": [...]}}``: the reference is the first
  Python 3 solution (language 3); visible cases are the public tests, hidden ones the public
  and private tests (``generated_tests`` are not read). Task id: ``name``.
- **cases**: ``{"task_id", "prompt" (or "question"/"description"), "reference_solution"
  (or "solution"), "tests": [{"input": "...", "output": "..."}, ...]}`` (or ``"cases"``);
  visible: the first case.

Any row may set ``compare`` (``exact``, ``whitespace`` (default) or ``float``),
``tolerance`` (``float``: default 1e-6), ``test_timeout_s`` (one case's wall time, default
2 s), ``timeout_s`` (the whole run) and ``tags``. Each row becomes a ``stdio`` task (see
``sandboxes/harness/python_stdio.py``): one test per case; the prompt is the statement as a
docstring, so the program graded (prompt + completion) is the script itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import first_text, read_jsonl
from tasks_library.importers.mbpp import docstring

CASE_TIMEOUT_S = 2.0
MAX_TIMEOUT_S = 300.0
PYTHON3 = 3  # CodeContests' language code of Python 3 solutions
COMPARE = ("exact", "whitespace", "float")
INSTRUCTION = "Read the input from standard input and write the answer to standard output."


def read_stdio(path: Path) -> Iterator[dict]:
    """Yield task records from a JSONL(.gz) file of stdin/stdout tasks (any shape above).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`, or a row of
            no known shape, or one whose id, statement, reference, cases or options are
            missing or of the wrong type (the message names the file, line and field).
    """
    for where, row in read_jsonl(path, (), id_field=None):
        yield stdio_record(row, where)


def row_shape(row: dict) -> str | None:
    """``apps``, ``codecontests`` or ``cases`` for a row of that shape, else None."""
    if "input_output" in row:
        return "apps"
    if "public_tests" in row or "private_tests" in row:
        return "codecontests"
    if isinstance(row.get("tests", row.get("cases")), list):
        return "cases"
    return None


def _json_field(row: dict, name: str, where: str):
    value = row.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ImportFormatError(
                where, f"field {name!r}: not valid JSON ({exc})", field=name
            ) from exc
    return value


def _text(value, where: str, field: str) -> str:
    """A case's input or output: text, or a list of lines (joined, newline-terminated)."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(line if line.endswith("\n") else line + "\n" for line in value)
    if isinstance(value, str):
        return value
    raise ImportFormatError(
        where, f"field {field!r}: expected text or a list of lines", field=field.split("[")[0]
    )


def _pairs(inputs, outputs, where: str, field: str) -> list[dict]:
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ImportFormatError(
            where, f"field {field!r}: expected lists of inputs and outputs", field=field
        )
    if len(inputs) != len(outputs):
        raise ImportFormatError(
            where,
            f"field {field!r}: {len(inputs)} inputs but {len(outputs)} outputs",
            field=field,
        )
    return [
        {
            "input": _text(i, where, f"{field}.inputs[{k}]"),
            "output": _text(o, where, f"{field}.outputs[{k}]"),
        }
        for k, (i, o) in enumerate(zip(inputs, outputs))
    ]


def _apps(row: dict, where: str) -> tuple[str, str, str, list[dict], list[dict]]:
    spec = _json_field(row, "input_output", where)
    if not isinstance(spec, dict):
        raise ImportFormatError(
            where,
            "field 'input_output': expected an object with inputs and outputs",
            field="input_output",
        )
    if spec.get("fn_name"):
        raise ImportFormatError(
            where,
            f"field 'input_output': a call-based problem (fn_name {spec['fn_name']!r}) is a "
            "function task, not a stdin/stdout one",
            field="input_output",
        )
    cases = _pairs(spec.get("inputs"), spec.get("outputs"), where, "input_output")
    solutions = _json_field(row, "solutions", where)
    if not isinstance(solutions, list) or not any(isinstance(s, str) and s for s in solutions):
        raise ImportFormatError(
            where,
            "field 'solutions': expected a list holding at least one solution (the reference)",
            field="solutions",
        )
    reference = next(s for s in solutions if isinstance(s, str) and s)
    _name, statement = first_text(row, where, "question", "prompt", "description")
    if isinstance(row.get("task_id"), str) or isinstance(row.get("id"), str):
        task_id = first_text(row, where, "task_id", "id")[1]
    else:
        task_id = f"APPS/{_integer_id(row, 'problem_id', where)}"
    return task_id, statement, reference, cases, cases[:1]


def _integer_id(row: dict, name: str, where: str) -> int:
    value = row.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise ImportFormatError(
        where, f"field {name!r}: expected a non-negative integer id, got {value!r}", field=name
    )


def _codecontests(row: dict, where: str) -> tuple[str, str, str, list[dict], list[dict]]:
    groups = {}
    for name in ("public_tests", "private_tests"):
        group = row.get(name) or {"input": [], "output": []}
        if not isinstance(group, dict):
            raise ImportFormatError(
                where, f"field {name!r}: expected an object with input and output", field=name
            )
        groups[name] = _pairs(group.get("input"), group.get("output"), where, name)
    cases = groups["public_tests"] + groups["private_tests"]
    solutions = row.get("solutions")
    if not isinstance(solutions, dict):
        raise ImportFormatError(
            where,
            "field 'solutions': expected {language: [...], solution: [...]}",
            field="solutions",
        )
    languages, sources = solutions.get("language"), solutions.get("solution")
    if not isinstance(languages, list) or not isinstance(sources, list):
        raise ImportFormatError(
            where, "field 'solutions': expected lists language and solution", field="solutions"
        )
    python = [s for lang, s in zip(languages, sources) if lang == PYTHON3 and isinstance(s, str)]
    if not python:
        raise ImportFormatError(
            where,
            "field 'solutions': no Python 3 solution (language 3) to be the reference",
            field="solutions",
        )
    _name, statement = first_text(row, where, "description", "question", "prompt")
    task_id = first_text(row, where, "name", "task_id", "id")[1]
    return task_id, statement, python[0], cases, groups["public_tests"] or cases[:1]


def _cases(row: dict, where: str) -> tuple[str, str, str, list[dict], list[dict]]:
    name = "tests" if "tests" in row else "cases"
    raw = row[name]
    cases = []
    for k, case in enumerate(raw):
        if not isinstance(case, dict) or "input" not in case or "output" not in case:
            raise ImportFormatError(
                where, f"field '{name}[{k}]': expected an object with input and output", field=name
            )
        cases.append(
            {
                "input": _text(case["input"], where, f"{name}[{k}].input"),
                "output": _text(case["output"], where, f"{name}[{k}].output"),
            }
        )
    _field, task_id = first_text(row, where, "task_id", "id")
    _field, statement = first_text(row, where, "prompt", "question", "description")
    _field, reference = first_text(row, where, "reference_solution", "solution")
    return task_id, statement, reference, cases, cases[:1]


SHAPES = {"apps": _apps, "codecontests": _codecontests, "cases": _cases}


def _number(row: dict, name: str, where: str, default: float | None) -> float | None:
    value = row.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ImportFormatError(
            where, f"field {name!r}: expected a positive number of seconds", field=name
        )
    return float(value)


def suite_source(cases: list[dict], compare: str, tolerance: float | None) -> str:
    """A ``stdio`` suite (JSON) of ``cases``, ids ``case_<k>`` in order."""
    suite: dict = {"compare": compare}
    if tolerance is not None:
        suite["tolerance"] = tolerance
    suite["cases"] = [
        {"id": f"case_{k}", "input": c["input"], "output": c["output"]} for k, c in enumerate(cases)
    ]
    return json.dumps(suite, indent=1) + "\n"


def stdio_record(row: dict, where: str) -> dict:
    """One row of any shape above as a ``stdio`` task record.

    Raises:
        ImportFormatError: as :func:`read_stdio`.
    """
    shape = row_shape(row)
    if shape is None:
        raise ImportFormatError(
            where,
            "not a stdin/stdout task: expected input_output (APPS), public_tests/private_tests "
            "(CodeContests) or tests: [{input, output}, ...]",
        )
    task_id, statement, reference, cases, visible = SHAPES[shape](row, where)
    if not cases:
        raise ImportFormatError(where, "the row has no input/output case", field="tests")
    compare = row.get("compare", "whitespace")
    if compare not in COMPARE:
        raise ImportFormatError(
            where, f"field 'compare': expected one of {', '.join(COMPARE)}", field="compare"
        )
    tolerance = row.get("tolerance")
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0
    ):
        raise ImportFormatError(
            where, "field 'tolerance': expected a number >= 0", field="tolerance"
        )
    case_timeout = _number(row, "test_timeout_s", where, CASE_TIMEOUT_S)
    timeout = _number(row, "timeout_s", where, None) or min(
        MAX_TIMEOUT_S, max(10.0, 2.0 + len(cases) * case_timeout)
    )
    # The visible cases keep their ids in the hidden suite (case_0 is case_0 in both).
    hidden = suite_source(cases, compare, tolerance)
    shown = suite_source(visible, compare, tolerance)
    reference = reference if reference.endswith("\n") else reference + "\n"
    return {
        "task_id": task_id,
        "prompt": docstring(f"{statement.strip()}\n\n{INSTRUCTION}"),
        "entry_point": "script",
        "reference_solution": reference,
        "tests": hidden,
        "visible_tests": shown,
        "harness": "stdio",
        "timeout_s": timeout,
        "test_timeout_s": min(case_timeout, timeout),
        "tags": row.get("tags") or ["stdio", shape],
        "where": where,
    }
