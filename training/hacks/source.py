"""One parse of a submission, shared by every detector.

:func:`source_of` parses ``submission.code`` once and caches the :class:`Source` in
``submission.extra`` (key :data:`CACHE_KEY`), so six detectors cost one ``ast.parse`` and one
walk. The walk records, with line numbers and the enclosing function, what the detectors
ask about: imports, calls, stores to attributes and subscripts, raises, attribute names,
classes, module-level rebinding of names, and literals (evaluated lazily, only when the
hard-coded-outputs detector needs them). Names are resolved through the program's own
imports and simple aliases: ``from os import _exit as q; q(0)`` is the call ``os._exit``,
``getattr(__import__("time"), "sleep")`` is ``time.sleep``, ``__builtins__`` is ``builtins``.

Docstrings and other bare string statements are skipped: a HumanEval prompt's examples are
not code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

CACHE_KEY = "_hacks_source"
MAX_SNIPPET = 80
_LITERAL_NODES = (ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict)
_EQUALITY = {ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot}


@dataclass(frozen=True)
class Site:
    """One place in the program: a resolved dotted ``name`` (``sys.exit``, ``builtins.abs``,
    ``time.perf_counter``), its ``line``, the enclosing function (``<module>`` at top level)
    and the node itself."""

    name: str
    line: int
    scope: str
    node: ast.AST


class Source:
    """The parsed program and everything the detectors look up in it (see the module doc)."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines()
        self.error = ""
        self.tree: ast.Module | None = None
        self.aliases: dict[str, str] = {"__builtins__": "builtins"}
        self.alias_lines: dict[str, int] = {}  # alias -> the line that bound it
        self.imports: list[Site] = []
        self.calls: list[Site] = []
        self.stores: list[Site] = []  # attribute/subscript targets, setattr/delattr
        self.raises: list[Site] = []
        self.attributes: list[Site] = []  # name: the attribute's own name (``f_back``)
        self.rebinds: list[Site] = []  # module-level (or ``global``) bindings of a name
        self.classes: list[tuple[ast.ClassDef, str]] = []
        self.functions: dict[str, ast.AST] = {}
        self.class_scopes: set[str] = set()  # scopes that are class bodies (they run at import)
        self._raw_calls: list[tuple[ast.Call, str]] = []
        self._raw_stores: list[tuple[ast.AST, str]] = []
        self._raw_raises: list[tuple[ast.AST, str]] = []
        self._alias_assigns: list[tuple[ast.Assign, str]] = []
        self._literal_nodes: list[tuple[ast.AST, str]] = []  # (node, "bare" | "branch" | "key")
        self._literals: list[tuple[object, int, str]] | None = None
        try:
            self.tree = ast.parse(text)
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"[:200]
            return
        self._walk(self.tree)
        self._finish()

    # -- the walk ---------------------------------------------------------------------

    def _walk(self, tree: ast.Module) -> None:
        stack: list[tuple[ast.AST, str, frozenset]] = [(tree, "<module>", frozenset())]
        branch_ids: set[int] = set()
        key_ids: set[int] = set()
        while stack:
            node, scope, globals_ = stack.pop()
            kind = type(node)
            if (
                kind is ast.Expr
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                continue  # a docstring or a bare string: not code
            child_scope, child_globals = scope, globals_
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
                child_scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
                child_globals = frozenset(
                    n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names
                )
                if scope == "<module>":
                    self.functions[node.name] = node
                    self.rebinds.append(Site(node.name, node.lineno, scope, node))
            elif kind is ast.Lambda:
                child_scope = f"{scope}.<lambda>" if scope != "<module>" else "<lambda>"
            elif kind is ast.ClassDef:
                self.classes.append((node, scope))
                child_scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
                self.class_scopes.add(child_scope)
                if scope == "<module>":
                    self.rebinds.append(Site(node.name, node.lineno, scope, node))
            elif kind is ast.Call:
                self._raw_calls.append((node, scope))
            elif kind in (ast.Import, ast.ImportFrom):
                self._import(node, scope)
            elif kind is ast.Attribute:
                self.attributes.append(Site(node.attr, node.lineno, scope, node))
            elif kind is ast.Raise:
                if node.exc is not None:
                    self._raw_raises.append((node, scope))
            elif kind in (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete):
                targets = node.targets if kind in (ast.Assign, ast.Delete) else [node.target]
                for target in targets:
                    for leaf in _target_leaves(target):
                        if isinstance(leaf, (ast.Attribute, ast.Subscript)):
                            self._raw_stores.append((leaf, scope))
                        elif isinstance(leaf, ast.Name) and (
                            scope == "<module>" or leaf.id in globals_
                        ):
                            self.rebinds.append(Site(leaf.id, leaf.lineno, scope, leaf))
                if (
                    kind is ast.Assign
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    self._alias_assigns.append((node, scope))
            elif kind is ast.Compare and all(type(op) in _EQUALITY for op in node.ops):
                for operand in (node.left, *node.comparators):
                    if isinstance(operand, _LITERAL_NODES):
                        branch_ids.add(id(operand))
            elif kind is ast.Dict:
                for key in node.keys:
                    if key is not None and isinstance(key, _LITERAL_NODES):
                        key_ids.add(id(key))
            elif kind is ast.MatchValue:
                branch_ids.add(id(node.value))
            if kind in _LITERAL_NODES:
                where = (
                    "branch" if id(node) in branch_ids else "key" if id(node) in key_ids else "bare"
                )
                self._literal_nodes.append((node, where))
            for child in ast.iter_child_nodes(node):
                stack.append((child, child_scope, child_globals))

    def _import(self, node: ast.AST, scope: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imports.append(Site(alias.name, node.lineno, scope, node))
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                    self.alias_lines[alias.asname] = node.lineno
                else:
                    root = alias.name.split(".")[0]
                    self.aliases.setdefault(root, root)
                    self.alias_lines.setdefault(root, node.lineno)
        elif node.module and not node.level:
            self.imports.append(Site(node.module, node.lineno, scope, node))
            for alias in node.names:
                if alias.name != "*":
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    self.alias_lines[alias.asname or alias.name] = node.lineno

    def _finish(self) -> None:
        # ``q = sys.exit`` / ``t = __import__("time")``: later uses of ``q`` resolve too.
        for node, _scope in sorted(self._alias_assigns, key=lambda pair: pair[0].lineno):
            name = node.targets[0].id
            target = self.resolve(node.value)
            if (
                target
                and target != name
                and isinstance(node.value, (ast.Attribute, ast.Call, ast.Name, ast.Subscript))
            ):
                if isinstance(node.value, ast.Name) and node.value.id not in self.aliases:
                    continue  # ``x = y`` between plain variables
                self.aliases[name] = target
                self.alias_lines[name] = node.lineno
        self.imports.sort(key=lambda s: s.line)
        for node, scope in self._raw_calls:
            name = self.resolve(node.func)
            if name:
                self.calls.append(Site(name, node.lineno, scope, node))
            if (
                name in ("setattr", "delattr", "builtins.setattr", "builtins.delattr")
                and len(node.args) >= 2
            ):
                owner = self.resolve(node.args[0]) or "?"
                attr = node.args[1].value if isinstance(node.args[1], ast.Constant) else "?"
                self.stores.append(Site(f"{owner}.{attr}", node.lineno, scope, node))
        self.calls.sort(key=lambda s: s.line)
        for node, scope in self._raw_stores:
            self.stores.append(Site(self.resolve(node) or "?", node.lineno, scope, node))
        self.stores.sort(key=lambda s: s.line)
        for node, scope in self._raw_raises:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            self.raises.append(Site(self.resolve(exc) or "?", node.lineno, scope, node))
        self.raises.sort(key=lambda s: s.line)
        self.attributes.sort(key=lambda s: s.line)

    # -- lookups ----------------------------------------------------------------------

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` stands for, or None (a computed value)."""
        parts: list[str] = []
        for _depth in range(64):
            if isinstance(node, ast.Name):
                base = self.aliases.get(node.id, node.id)
                return ".".join([base, *reversed(parts)])
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Subscript):
                key = node.slice
                parts.append(
                    key.value
                    if isinstance(key, ast.Constant) and isinstance(key.value, str)
                    else "[]"
                )
                node = node.value
            elif isinstance(node, ast.Call):
                func = self.resolve(node.func)
                first = node.args[0] if node.args else None
                literal = (
                    first.value
                    if isinstance(first, ast.Constant) and isinstance(first.value, str)
                    else None
                )
                if (
                    func in ("__import__", "builtins.__import__", "importlib.import_module")
                    and literal
                ):
                    return ".".join([literal, *reversed(parts)])
                if func in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                    attr = node.args[1]
                    parts.append(
                        attr.value
                        if isinstance(attr, ast.Constant) and isinstance(attr.value, str)
                        else "?"
                    )
                    node = node.args[0]
                elif func in ("vars", "builtins.vars") and first is not None:
                    parts.append("__dict__")
                    node = first
                elif func:
                    return ".".join([f"{func}()", *reversed(parts)])
                else:
                    return None
            else:
                return None
        return None

    def at_import(self, site: Site) -> bool:
        """True when ``site`` runs while the program loads (module or class body)."""
        return site.scope == "<module>" or site.scope in self.class_scopes

    def where(self, site: Site) -> str:
        """``"at import"`` or ``"in f()"``."""
        return "at import" if self.at_import(site) else f"in {site.scope}()"

    def snippet(self, line: int) -> str:
        """The stripped text of ``line`` (1-based), cut to 80 characters."""
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return text if len(text) <= MAX_SNIPPET else text[: MAX_SNIPPET - 3] + "..."

    def item(self, site: Site | int, what: str = "") -> dict:
        """A short evidence item: ``{"line", "code"}`` plus ``what`` when given."""
        line = site if isinstance(site, int) else site.line
        found = {"line": line, "code": self.snippet(line)}
        if what:
            found["what"] = what
        return found

    def literals(self) -> list[tuple[object, int, str]]:
        """Every literal value outside docstrings: ``(value, line, where)``, ``where`` being
        ``branch`` (an operand of an equality or membership test, or a ``match`` case), ``key`` (a
        dict key) or ``bare``. Evaluated on first use only."""
        if self._literals is None:
            found = []
            ordered = sorted(
                self._literal_nodes,
                key=lambda p: (getattr(p[0], "lineno", 0), getattr(p[0], "col_offset", 0)),
            )
            for node, where in ordered:
                try:
                    value = ast.literal_eval(node)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                found.append((value, getattr(node, "lineno", 0), where))
            self._literals = found
        return self._literals


def _target_leaves(target: ast.AST):
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_leaves(element)
    elif isinstance(target, ast.Starred):
        yield from _target_leaves(target.value)
    else:
        yield target


def source_of(submission) -> Source:
    """The submission's :class:`Source`, parsed once and cached in ``submission.extra``."""
    cached = submission.extra.get(CACHE_KEY)
    if cached is None or cached.text is not submission.code:
        cached = submission.extra[CACHE_KEY] = Source(submission.code)
    return cached


def string_parts(node: ast.AST | None) -> list[str]:
    """The literal text pieces of a path-like argument: a string, an f-string's constant
    parts, a concatenation's, an ``os.path.join``'s (``f"/proc/{pid}/environ"`` ->
    ``["/proc/", "/environ"]``)."""
    if node is None:
        return []
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def audit_events(*results) -> list[tuple[str, tuple[str, ...]]]:
    """The audit-hook events recorded inside the submission's sandbox, where the results carry
    them (``ExecutionResult.audit``: ``{"event", "args"}`` dicts, ``args`` a short repr of the
    event's arguments), as ``(event, args)`` with ``args`` split into text items (argv lists
    flattened: ``subprocess.Popen`` gives ``("cat", "cat", "/proc/1/cmdline", ...)``). Empty
    where nothing was recorded (older results, Node.js)."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for result in results:
        for event in getattr(result, "audit", None) or []:
            if isinstance(event, dict):
                name, args = event.get("event") or event.get("name") or "", event.get("args", ())
            elif isinstance(event, (list, tuple)) and event:
                name, args = event[0], event[1] if len(event) == 2 else event[1:]
            elif isinstance(event, str):
                name, _, args = event.partition(":")
            else:
                continue
            found.append((str(name).strip(), _audit_args(args)))
    return found


_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def _audit_args(args) -> tuple[str, ...]:
    if isinstance(args, (list, tuple)):
        items = list(args)
    else:
        text = str(args)
        try:
            parsed = ast.literal_eval(text) if len(text) < 2000 else None
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        if isinstance(parsed, tuple):
            items = list(parsed)
        else:  # a repr cut short, or holding ``<type>`` placeholders: its quoted strings
            items = [a or b for a, b in _QUOTED.findall(text)] or [text]
    flat = []
    for item in items:
        flat.extend(item if isinstance(item, list) else [item])
    return tuple(str(item)[:200] for item in flat[:16])


def events_text(args: tuple[str, ...]) -> str:
    """An event's arguments as one short line of evidence."""
    return ", ".join(args)[:120]
