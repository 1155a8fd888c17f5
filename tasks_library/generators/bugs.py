"""Bugs injected into a real project's source modules, as minimal textual edits.

The rewrites are Crucible's mutation operators (``tasks_library/validation/mutants.py``:
arithmetic, compare, constant, boundary, return, boolean) plus the procedural modifications
SWE-smith (Yang et al., 2025) applies to real repositories: invert a condition, drop a
statement, swap a call's arguments or a non-commutative operator's operands, remove an
early return. Only code inside functions and methods is changed, never a docstring or an
annotation, and never a test module (the caller passes source modules only).

Each bug is applied to the file's text, not by unparsing the module: only the characters of
the changed node move, so the reference patch is the few lines a developer's fix would touch
and the rest of the file keeps its comments and formatting. Every rendering is checked by
parsing it again: its tree must equal the tree-level edit's, else the candidate is dropped
(or retried with parentheses, where operator precedence needed them).
"""

from __future__ import annotations

import ast
import copy
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tasks_library.validation.mutants import frozen_nodes, python_node_edits

# SWE-smith's kinds and the mutation engine's operators, in the order a round robin visits them.
KINDS = (
    "invert_condition",
    "drop_statement",
    "swap_arguments",
    "remove_return",
    "compare",
    "boundary",
    "arithmetic",
    "boolean",
    "return",
    "constant",
)
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_DROPPABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.Raise, ast.If, ast.Delete)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_Path = tuple[tuple[str, int | None], ...]


@dataclass(frozen=True)
class Bug:
    """One injected bug.

    Attributes:
        path: the source module's workspace path; function: the qualified name of the function
            or method changed (``LRUCache.popitem``); line: 1-based line of the change;
        kind: one of :data:`KINDS`; description: the change in words (``line 12: `<` -> `<=```);
        buggy: the module's whole text with the bug.
    """

    path: str
    function: str
    line: int
    kind: str
    description: str
    buggy: str


@dataclass(frozen=True)
class _Candidate:
    path: str
    function: str
    node_path: _Path
    kind: str
    index: int  # which of the node's edits (engine operators yield several)
    line: int


# --------------------------------------------------------------------------- locating nodes


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for name, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield name, None, value
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield name, index, item


def _at(module: ast.AST, path: _Path) -> ast.AST:
    node = module
    for name, index in path:
        value = getattr(node, name)
        node = value if index is None else value[index]
    return node


def _function_nodes(module: ast.Module) -> Iterator[tuple[str, _Path, ast.AST]]:
    """``(qualified function name, path, node)`` for every node inside a function's body;
    a nested function's nodes belong to the nested one (``outer.inner``)."""

    def walk(node: ast.AST, path: _Path, scope: list[str], function: str | None):
        for name, index, child in _children(node):
            child_path = path + ((name, index),)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualified = ".".join([*scope, child.name])
                for position, statement in enumerate(child.body):  # not its decorators
                    statement_path = child_path + (("body", position),)
                    yield qualified, statement_path, statement
                    yield from walk(statement, statement_path, [*scope, child.name], qualified)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, child_path, [*scope, child.name], None)
            elif function is not None:
                yield function, child_path, child
                yield from walk(child, child_path, scope, function)
            elif isinstance(child, ast.stmt):  # module or class level: find the defs inside
                yield from walk(child, child_path, scope, None)

    yield from walk(module, (), [], None)


# --------------------------------------------------------------------------- the edits


def _kinds_of(node: ast.AST, path: _Path, parent: ast.AST) -> Iterator[tuple[str, int]]:
    """The bug kinds that apply to ``node`` (with the engine edit's index where several)."""
    for index, (operator, _edit, _text) in enumerate(python_node_edits(node)):
        yield operator, index
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (
        isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
    ):
        yield "invert_condition", 0
    field, position = path[-1]
    in_body = position is not None and isinstance(getattr(parent, field, None), list)
    if in_body and isinstance(node, _DROPPABLE) and field in ("body", "orelse", "finalbody"):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            yield "drop_statement", 0
    if isinstance(node, ast.Return) and in_body:
        siblings = getattr(parent, field)
        if position < len(siblings) - 1 or not isinstance(parent, ast.FunctionDef):
            yield "remove_return", 0  # an early return: the code after it runs instead
    if isinstance(node, ast.Call):
        args = node.args
        if (
            len(args) >= 2
            and not any(isinstance(a, ast.Starred) for a in args[:2])
            and ast.dump(args[0]) != ast.dump(args[1])
        ):
            yield "swap_arguments", 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, _NON_COMMUTATIVE):
        if ast.dump(node.left) != ast.dump(node.right):
            yield "swap_arguments", 1


class _Text:
    """A module's text addressed by ast's (line, UTF-8 column) positions."""

    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode("utf-8")

    def line_text(self, line: int) -> bytes:
        return self.data[self.starts[line - 1] : self.starts[line]]

    def whole_lines(self, node: ast.AST) -> tuple[int, int] | None:
        """The byte range of the lines ``node`` fills alone, or None when it shares them."""
        start, end = self.span(node)
        first, last = self.starts[node.lineno - 1], self.starts[node.end_lineno]
        before = self.data[first:start]
        after = self.data[end:last].split(b"#", 1)[0]
        if before.strip() or after.strip():
            return None
        return first, last

    def apply(self, edits: list[tuple[int, int, str]]) -> str:
        data = self.data
        for start, end, replacement in sorted(edits, reverse=True):
            data = data[:start] + replacement.encode("utf-8") + data[end:]
        return data.decode("utf-8")


def _render(text: _Text, module: ast.Module, candidate: _Candidate) -> tuple[str, str] | None:
    """``(buggy text, description)`` of ``candidate``, checked against the tree-level edit; None
    when no rendering parses to the same tree."""
    node = _at(module, candidate.node_path)
    parent = _at(module, candidate.node_path[:-1])
    field, position = candidate.node_path[-1]
    indent = text.line_text(node.lineno)[: node.col_offset].decode("utf-8")
    attempts: list[list[tuple[int, int, str]]] = []
    line = f"line {node.lineno}"
    kind = candidate.kind
    if kind in ("invert_condition",):
        original = text.segment(node.test)
        start, end = text.span(node.test)
        node.test = ast.UnaryOp(ast.Not(), node.test)
        attempts = [[(start, end, f"not ({original})")]]
        description = f"{line}: condition `{_short(original)}` inverted"
    elif kind in ("drop_statement", "remove_return"):
        lines = text.whole_lines(node)
        if lines is None:
            return None
        siblings = getattr(parent, field)
        dropped = _short(text.segment(node))
        if len(siblings) == 1:
            siblings[position] = ast.Pass()
            attempts = [[(lines[0], lines[1], f"{indent}pass\n")]]
        else:
            del siblings[position]
            attempts = [[(lines[0], lines[1], "")]]
        description = f"{line}: `{dropped}` removed"
    elif kind == "swap_arguments":
        first, second = (
            (node.args[0], node.args[1]) if candidate.index == 0 else (node.left, node.right)
        )
        a, b = text.segment(first), text.segment(second)
        (a0, a1), (b0, b1) = text.span(first), text.span(second)
        if candidate.index == 0:
            node.args[0], node.args[1] = node.args[1], node.args[0]
        else:
            node.left, node.right = node.right, node.left
        attempts = [[(a0, a1, b), (b0, b1, a)], [(a0, a1, f"({b})"), (b0, b1, f"({a})")]]
        description = f"{line}: `{_short(a)}` and `{_short(b)}` swapped"
    else:  # one of the mutation engine's operators
        edits = list(python_node_edits(node))
        operator, edit, words = edits[candidate.index]
        start, end = text.span(node)
        new = edit(copy.deepcopy(node))
        if position is None:
            setattr(parent, field, new)
        else:
            getattr(parent, field)[position] = new
        if isinstance(node, ast.stmt):  # `return x` -> `return None`: one statement, whole
            lines = text.whole_lines(node)
            if lines is None:
                return None
            rendered = "\n".join(indent + part for part in ast.unparse(new).splitlines())
            attempts = [[(lines[0], lines[1], rendered + "\n")]]
        else:
            rendered = ast.unparse(new)
            attempts = [[(start, end, rendered)], [(start, end, f"({rendered})")]]
        description = f"{line}: {words}"
    expected = ast.dump(module)
    for edits in attempts:
        buggy = text.apply(edits)
        try:
            if ast.dump(ast.parse(buggy)) == expected:
                return buggy, description
        except SyntaxError:
            continue
    return None


def _short(code: str, limit: int = 60) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


# --------------------------------------------------------------------------- the generator


def candidates(path: str, source: str, *, covered: set[str] | None = None) -> list[_Candidate]:
    """Every bug that could be injected into ``source`` (the module at ``path``), unrendered.

    Args:
        covered: identifiers the test modules mention; a function is a target only when its
            name (or, for a dunder method, its class's) is among them. None: every function.

    Raises:
        SyntaxError: ``source`` does not parse.
    """
    module = ast.parse(source)
    frozen = frozen_nodes(module)
    found = []
    for function, node_path, node in _function_nodes(module):
        if id(node) in frozen or not hasattr(node, "lineno"):
            continue
        if covered is not None and not _is_covered(function, covered):
            continue
        parent = _at(module, node_path[:-1])
        for kind, index in _kinds_of(node, node_path, parent):
            found.append(_Candidate(path, function, node_path, kind, index, node.lineno))
    return found


def _is_covered(function: str, covered: set[str]) -> bool:
    parts = function.split(".")
    name = parts[-1]
    if name.startswith("__") and name.endswith("__"):
        return any(part in covered for part in parts[:-1])
    return name.lstrip("_") in covered or name in covered


def names_in_tests(sources: list[str]) -> set[str]:
    """The identifiers the test modules mention (what :func:`candidates`' ``covered`` takes)."""
    found: set[str] = set()
    for source in sources:
        found.update(_IDENTIFIER.findall(source))
    return found


def sample(sources: dict[str, str], *, seed: int, covered: set[str] | None = None) -> Iterator[Bug]:
    """Bugs in ``sources`` (``{path: text}``), in a seeded order: the kinds taken in turn
    (round robin over :data:`KINDS`, each kind's candidates shuffled with ``seed``), so that a
    few bugs are of several kinds and spread over the modules. Candidates whose rendering does
    not reproduce their tree-level edit are skipped.

    Deterministic: the same sources, ``covered`` and ``seed`` give the same bugs in the same order.
    """
    rng = random.Random(seed)
    by_kind: dict[str, list[_Candidate]] = {kind: [] for kind in KINDS}
    for path in sorted(sources):
        try:
            found = candidates(path, sources[path], covered=covered)
        except SyntaxError:
            continue  # a module of another Python version: not a target here
        for candidate in found:
            by_kind[candidate.kind].append(candidate)
    for kind in KINDS:
        rng.shuffle(by_kind[kind])
    texts = {path: _Text(text) for path, text in sources.items()}
    cursors = dict.fromkeys(KINDS, 0)
    while any(cursors[k] < len(by_kind[k]) for k in KINDS):
        for kind in KINDS:
            if cursors[kind] >= len(by_kind[kind]):
                continue
            candidate = by_kind[kind][cursors[kind]]
            cursors[kind] += 1
            rendered = _render(texts[candidate.path], ast.parse(sources[candidate.path]), candidate)
            if rendered is None:
                continue
            buggy, description = rendered
            yield Bug(
                path=candidate.path,
                function=candidate.function,
                line=candidate.line,
                kind=kind,
                description=description,
                buggy=buggy,
            )
