"""Read MBPP-shaped JSONL: integer ids, a task in words, reference code, and tests as a list
of assert statements (plus optional setup code and challenge tests), with no entry point.

A row (the shape of MBPP, Austin et al. 2021)::

    {"task_id": 11, "text": "Write a python function to remove the first and last
     occurrence of a given character from the string.",
     "code": "def remove_Occ(s, ch): ...",
     "test_list": ["assert remove_Occ(\\"hello\\", \\"l\\") == \\"heo\\"", ...],
     "test_setup_code": "", "challenge_test_list": []}

The sanitized variant's names are read too: ``prompt`` for ``text``, ``test_imports`` (a
list of import lines) beside ``test_setup_code``. Each row becomes a ``python-check`` task:

- **task id**: ``MBPP/<id>`` for an integer id (``MBPP/11``), a text id as it is;
- **entry point**: the first function the asserts call that the reference defines at
  module level (MBPP gives none; the asserts call the function by its name, which the
  tests' sandbox binds to the program's function);
- **tests**: ``check(candidate)`` holding each assert of ``test_list`` then of
  ``challenge_test_list``, one test id per assert (``assert_0``...); visible: the first two;
- **setup code** (``TestSuiteVersion.setup_code``): the reference's module-level imports,
  classes and constants that the tests or the row's setup code use (and what those use in
  turn), then the row's ``test_setup_code``: run before the tests, the classes shared with
  the program's sandbox so their instances cross (a tree-node class, MBPP/601's ``Pair``).
  Functions of the reference are never copied: a test that calls one calls the program's;
- **prompt**: a docstring holding the text and the first assert (the function's name and
  signature); the program graded is the prompt followed by the completion (the whole code).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

from sandboxes.grading import statement_text
from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import first_text, read_jsonl

ID_PREFIX = "MBPP/"


def read_mbpp(path: Path) -> Iterator[dict]:
    """Yield task records from an MBPP-shaped JSONL(.gz) file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`, or a row
            whose ``task_id``, ``text``, ``code``, ``test_list``, ``challenge_test_list``,
            ``test_setup_code`` or ``test_imports`` is missing, of the wrong type or does not
            parse, or whose asserts call no function the reference defines (the message
            names the file, line and field).
    """
    for where, row in read_jsonl(path, (), id_field=None):
        yield mbpp_record(row, where)


def _task_id(row: dict, where: str) -> str:
    if "task_id" not in row:
        raise ImportFormatError(where, "missing field 'task_id'", field="task_id")
    raw = row["task_id"]
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return f"{ID_PREFIX}{raw}"
    if isinstance(raw, str) and raw.strip():
        return raw
    raise ImportFormatError(
        where,
        f"field 'task_id': expected a non-negative integer or a non-empty string, got {raw!r}",
        field="task_id",
    )


def _parsed(source: str, where: str, field: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ImportFormatError(
            where, f"field {field!r}: does not parse ({exc.msg}, line {exc.lineno})", field=field
        ) from exc


def _tests(row: dict, where: str) -> list[tuple[str, ast.Module]]:
    """``[(assert text, parsed)]`` of ``test_list`` then ``challenge_test_list``."""
    if "test_list" not in row:
        raise ImportFormatError(where, "missing field 'test_list'", field="test_list")
    tests = []
    for name, required in (("test_list", True), ("challenge_test_list", False)):
        items = row.get(name)
        if items is None and not required:
            continue
        if not isinstance(items, list) or (required and not items):
            raise ImportFormatError(
                where, f"field {name!r}: expected a non-empty list of assert statements", field=name
            )
        for k, text in enumerate(items):
            if not isinstance(text, str) or not text.strip():
                raise ImportFormatError(
                    where, f"field '{name}[{k}]': must be a non-empty string", field=name
                )
            text = textwrap.dedent(text).strip("\n")
            tests.append((text, _parsed(text, where, f"{name}[{k}]")))
    return tests


def _setup_source(row: dict, where: str) -> str:
    parts = []
    imports = row.get("test_imports")
    if imports is not None:
        if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
            raise ImportFormatError(
                where, "field 'test_imports': expected a list of import lines", field="test_imports"
            )
        parts.extend(imports)
    setup = row.get("test_setup_code")
    if setup is not None:
        if not isinstance(setup, str):
            raise ImportFormatError(
                where, "field 'test_setup_code': must be a string", field="test_setup_code"
            )
        parts.append(setup)
    source = "\n".join(part.strip("\n") for part in parts if part.strip())
    if source:
        _parsed(source, where, "test_setup_code")
    return source + "\n" if source else ""


def _calls(modules: list[ast.Module]) -> list[str]:
    """Names called as plain functions, in the order they appear."""
    found = []
    for module in modules:
        calls = [
            node
            for node in ast.walk(module)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        ]
        calls.sort(key=lambda node: (node.lineno, node.col_offset))
        found.extend(node.func.id for node in calls)
    return list(dict.fromkeys(found))


def _loaded(nodes) -> set[str]:
    return {
        node.id
        for tree in nodes
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def _bindings(module: ast.Module) -> tuple[dict[str, ast.stmt], set[str]]:
    """The reference's module-level definitions the tests may share (imports, classes,
    constants) by name, and the names of its functions."""
    shared: dict[str, ast.stmt] = {}
    functions: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name != "*":
                    shared[alias.asname or alias.name.split(".")[0]] = stmt
        elif isinstance(stmt, ast.ClassDef):
            shared[stmt.name] = stmt
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if all(isinstance(t, ast.Name) for t in targets):
                for target in targets:
                    shared[target.id] = stmt
    return shared, functions


def reference_definitions(code: str, module: ast.Module, used: set[str], own: set[str]) -> str:
    """The reference's imports, classes and constants among ``used`` (and what those use in
    turn), minus the names ``own`` the setup code binds itself, as their own source text in
    the reference's order."""
    shared, _functions = _bindings(module)
    chosen: dict[int, ast.stmt] = {}
    todo = [name for name in used if name in shared and name not in own]
    while todo:
        stmt = shared[todo.pop()]
        if id(stmt) in chosen:
            continue
        chosen[id(stmt)] = stmt
        todo.extend(n for n in _loaded([stmt]) if n in shared and n not in own)
    ordered = [stmt for stmt in module.body if id(stmt) in chosen]
    return "".join(statement_text(code, module, stmt) + "\n" for stmt in ordered)


def _bound(module: ast.Module) -> set[str]:
    """Names a module binds at its top level."""
    names = set()
    for stmt in module.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        else:
            names.update(
                node.id
                for node in ast.walk(stmt)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
            )
    return names


def check_source(tests: list[tuple[str, ast.Module]]) -> str:
    """A ``check(candidate)`` source holding the tests in order, each as written (its
    unparsed form where indenting would change a multi-line string of it)."""
    body = []
    for text, parsed in tests:
        indented = textwrap.indent(text, "    ")
        try:
            same = ast.dump(ast.parse(textwrap.dedent(indented))) == ast.dump(parsed)
        except SyntaxError:
            same = False
        body.append(indented if same else textwrap.indent(ast.unparse(parsed), "    "))
    return "def check(candidate):\n" + "\n".join(body) + "\n"


def docstring(text: str) -> str:
    """``text`` as a Python docstring statement (a line of its own, newline-terminated)."""
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{escaped}\n"""\n'


def mbpp_record(row: dict, where: str) -> dict:
    """One MBPP-shaped row as a task record (see the module's docstring).

    Raises:
        ImportFormatError: as :func:`read_mbpp`.
    """
    task_id = _task_id(row, where)
    _name, text = first_text(row, where, "text", "prompt")
    _name, code = first_text(row, where, "code")
    code = code if code.endswith("\n") else code + "\n"
    reference = _parsed(code, where, "code")
    tests = _tests(row, where)
    setup = _setup_source(row, where)
    _shared, functions = _bindings(reference)
    calls = _calls([parsed for _text, parsed in tests])
    entry = next((name for name in calls if name in functions), None)
    if entry is None:
        raise ImportFormatError(
            where,
            "field 'test_list': the asserts call no function the reference defines "
            f"(they call {', '.join(calls) or 'nothing'}; the reference defines "
            f"{', '.join(sorted(functions)) or 'no function'})",
            field="test_list",
        )
    setup_module = ast.parse(setup)
    used = _loaded([parsed for _text, parsed in tests] + [setup_module])
    shared = reference_definitions(code, reference, used, _bound(setup_module))
    shown = docstring(f"{text.strip()}\n\nYour code should pass this test:\n\n{tests[0][0]}")
    return {
        "task_id": task_id,
        "prompt": shown,
        "entry_point": entry,
        "reference_solution": code,
        "tests": check_source(tests),
        "setup_code": shared + setup,
        "harness": "python-check",
        "tags": ["mbpp"],
        "where": where,
    }
