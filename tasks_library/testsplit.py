"""Derive the visible test suite (shown to the policy) from a hidden ``check`` source."""

from __future__ import annotations

import ast

from sandboxes.harness.python_check import split_check

VISIBLE_TESTS = 2


def visible_subset(test_source: str, count: int = VISIBLE_TESTS) -> str:
    """The test source with ``check`` cut after its first ``count`` tests.

    Setup statements before the cut are kept, so the visible tests run as they do
    inside the full suite. The result is a valid ``check(candidate)`` source.

    Raises:
        SyntaxError, ValueError: as :func:`split_check`.
    """
    pairs = split_check(test_source)
    kept: list[ast.stmt] = []
    seen = 0
    for test_id, stmt in pairs:
        if seen == count:
            break
        kept.append(stmt)
        if test_id is not None:
            seen += 1
    module = ast.parse(test_source)
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            node.body = kept or [ast.Pass()]
    return ast.unparse(module) + "\n"
