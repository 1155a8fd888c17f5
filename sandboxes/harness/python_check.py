"""Grading harness for HumanEval-style Python tests, run *inside* the sandbox.

The test source defines ``check(candidate)``; each top-level statement of its body
that contains an ``assert`` is one test, and the others are setup run in order.
Running the statements one by one (instead of calling ``check`` once) gives a
result per test id, so a grader can count tests instead of trusting an exit code.

Protocol (standard library only, so it runs under ``python -I``):

* stdin: one JSON object ``{"nonce", "results_fd", "solution_path", "tests", "entry_point"}``;
  the test source arrives here and is never written into the workspace.
* the fd named ``results_fd`` in the spec: JSON lines ``{"nonce", "event": "test", "id", "passed", "error"}`` and a
  final ``{"nonce", "event": "done"}``. A test with no line is a failure to the host.

The host imports :func:`split_check` from this file to compute the expected ids,
so both sides agree on what the tests are.
"""

from __future__ import annotations

import ast
import json
import os
import sys

MAX_ERROR_CHARS = 500


def split_check(test_source: str) -> list[tuple[str | None, ast.stmt]]:
    """Split the body of ``check`` into ``(test_id, statement)`` pairs.

    ``test_id`` is ``"assert_<k>"`` for the k-th statement that contains an
    ``assert`` and ``None`` for setup statements.

    Raises:
        SyntaxError: the test source does not parse.
        ValueError: the source defines no ``check`` function.
    """
    module = ast.parse(test_source)
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            pairs: list[tuple[str | None, ast.stmt]] = []
            count = 0
            for stmt in node.body:
                if any(isinstance(sub, ast.Assert) for sub in ast.walk(stmt)):
                    pairs.append((f"assert_{count}", stmt))
                    count += 1
                else:
                    pairs.append((None, stmt))
            return pairs
    raise ValueError("test source defines no check(candidate) function")


def module_without_check(test_source: str) -> ast.Module:
    """The test module's top level (imports, constants, helpers) minus ``check``."""
    module = ast.parse(test_source)
    module.body = [n for n in module.body if not (isinstance(n, ast.FunctionDef) and n.name == "check")]
    return module


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:MAX_ERROR_CHARS]


def main() -> None:
    spec = json.loads(sys.stdin.read())
    sys.stdin.close()
    nonce = spec["nonce"]
    out = os.fdopen(spec["results_fd"], "w", buffering=1)

    def emit(**fields: object) -> None:
        out.write(json.dumps({"nonce": nonce, **fields}) + "\n")
        out.flush()

    pairs = split_check(spec["tests"])
    namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    load_error = None
    try:
        with open(spec["solution_path"], encoding="utf-8") as handle:
            source = handle.read()
        exec(compile(source, spec["solution_path"], "exec"), namespace)
        exec(compile(module_without_check(spec["tests"]), "<tests>", "exec"), namespace)
        namespace["candidate"] = namespace[spec["entry_point"]]
    except BaseException as exc:  # noqa: BLE001 - a SystemExit here must not end the harness
        load_error = _describe(exc)
        emit(event="load_error", error=load_error)

    for test_id, stmt in pairs:
        if load_error is not None:
            if test_id is not None:
                emit(event="test", id=test_id, passed=False, error=f"not run: {load_error}")
            continue
        try:
            exec(compile(ast.Module(body=[stmt], type_ignores=[]), "<tests>", "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - SystemExit/SkipTest from the submission fail the test
            if test_id is not None:
                emit(event="test", id=test_id, passed=False, error=_describe(exc))
            continue
        if test_id is not None:
            emit(event="test", id=test_id, passed=True, error="")
    emit(event="done")
    out.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip atexit handlers and finalizers the submission may have registered.
    os._exit(0)


if __name__ == "__main__":
    main()
