"""The second line of a repository grading: a differential check across a process boundary.

The first line (``harness/pytest_repository.py``) defends pytest's verdict inside the process
that runs the code under test, where a deliberate forgery stays possible. This line needs no
trust in that process. For a task with a reference patch:

1. **the calls** (:func:`plan_calls`, pure): every call in the task's test files (visible and
   hidden) of a module-level function of the repository's own code, with literal arguments,
   inside a FAIL_TO_PASS test or of a function the reference patch changes; then fresh inputs,
   each a literal call with every number scaled by 1,000 or shifted by 1,000 (the order of
   its arguments kept, far from the tested values) or with one argument mutated by type
   (``sandboxes.inputs``, EvalPlus's mutation). A call written as an operand of ``==`` in an
   ``assert`` (or the first argument of ``assertEqual``) is *strict*: a fix that passes that
   test must give the reference's value.
2. **three sides, three processes** (``harness/repository_calls.py``, each in a fresh session
   of the task's environment holding that side's files and no test): the task's own files
   (the bug) and the reference's, each call twice (a call whose two runs differ is not
   deterministic and is dropped), and the submission's, once. Only plain data crosses
   (``harness/plaindata.py``: exact types, so an object that fakes equality cannot cross).
3. **the judgement** (:func:`judge`): not resolved, with the input as evidence, when
   - a strict call's outcome differs from the reference's;
   - a literal call returns something that is not plain data where the reference returns
     plain data;
   - any call (literal or fresh) gives the bug's outcome where the reference differs from
     the bug ("the bug is still there": what hard-coding the tested inputs leaves);
   - on the fresh inputs whose outcome the fix changed (the bug's and the reference's differ),
     the submission differs from the reference on more than half (a value, an exception, an
     object that is not plain data): "right only on the tested inputs";
   - the submission's process did not answer (an exit at import, a hang, a forged answer).

An honest fix that differs from the reference on a few inputs (another order, another
exception for an input outside the contract) is not refused: only the tests' own assertions
are strict.
Where nothing qualifies (methods, objects that are not plain data), the check says why
(``not_applicable``) and the first line stands alone.
"""

from __future__ import annotations

import ast
import hashlib
import json
import secrets
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import result as R
from sandboxes.harness.plaindata import Codec, NotPlainData
from sandboxes.inputs import is_literal, mutate_inputs, rescaled_inputs
from sandboxes.repository.patches import apply_patch
from sandboxes.repository.paths import is_test_path
from sandboxes.repository.report import RepositoryResult, read_answer
from sandboxes.repository.runner import (
    BOOT,
    MIB,
    SITE_PACKAGES,
    SUPERVISOR,
    grading_limits,
    written_lines,
)
from sandboxes.sessions.workspace import Workspace

HARNESS = Path(__file__).resolve().parent.parent / "harness"
CALLS_PARTS = ("grading_trust.py", "grading_guard.py", "plaindata.py", "repository_calls.py")
MAX_CALLS = 120
FRESH_PER_CALL = 3
CALL_TIMEOUT_S = 5.0
EVIDENCE_ITEMS = 5
VALUE_CHARS = 200


@dataclass(frozen=True)
class Call:
    """One call the sides make: ``module.function(*args, **kwargs)``.

    Attributes:
        strict: an operand of ``==`` in a test's assertion (the fix must give the reference's
            value); fresh: a mutated input (judged only by "the bug is still there").
        where: the test it comes from (``path::function``), for evidence.
    """

    module: str
    function: str
    args: tuple
    kwargs: tuple = ()
    strict: bool = False
    fresh: bool = False
    where: str = ""

    def text(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.module}.{self.function}({', '.join(parts)})"[:VALUE_CHARS]


def module_name(path: str) -> str | None:
    """The dotted module a repository file imports as (``src/`` layouts too), or None."""
    if not path.endswith(".py") or is_test_path(path):
        return None
    parts = path[: -len(".py")].split("/")
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _functions(source: bytes) -> dict[str, str]:
    """Module-level function name -> its AST dump (what decides whether it changed)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return {
        node.name: ast.dump(node)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _reexports(source: bytes, module: str) -> dict[str, tuple[str, str]]:
    """Names a package module binds with ``from X import f`` (``{name: (X, f)}``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                package = module.split(".")[: len(module.split(".")) - node.level + 1]
                base = ".".join([*package, node.module]) if package else node.module
            for alias in node.names:
                found[alias.asname or alias.name] = (base, alias.name)
    return found


class _Repository:
    """The repository's own modules and their functions, as the task's files have them."""

    def __init__(self, files: Mapping[str, bytes]):
        self.sources = {}
        for path, content in files.items():
            name = module_name(path)
            if name is not None:
                self.sources[name] = bytes(content)
        self.functions = {name: _functions(source) for name, source in self.sources.items()}
        self.exports = {name: _reexports(source, name) for name, source in self.sources.items()}
        self.roots = ["src"] if any(p.startswith("src/") for p in files) else [""]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """Where ``module.name`` is defined, following re-exports (None: not a function of the
        repository)."""
        if depth > 5 or module not in self.functions:
            return None
        if name in self.functions[module]:
            return module, name
        if name in self.exports[module]:
            return self.resolve(*self.exports[module][name], depth + 1)
        return None


def _literal(node: ast.AST):
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("not a literal") from None
    if not is_literal(value):
        raise ValueError("not a literal")
    return value


def _bindings(tree: ast.Module, repository: _Repository) -> dict[str, tuple[str, str | None]]:
    """Names a test module binds to the repository: ``{name: (module, function or None)}``."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in repository.functions:
                    bound = alias.asname or alias.name
                    found[bound] = (alias.name if alias.asname else bound, None)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                name = alias.asname or alias.name
                dotted = f"{node.module}.{alias.name}"
                if dotted in repository.functions:
                    found[name] = (dotted, None)
                else:
                    found[name] = (node.module, alias.name)
    return found


def _target(func: ast.AST, bindings) -> tuple[str, str] | None:
    """``(module, function)`` a call's callee names through the test module's bindings."""
    if isinstance(func, ast.Name) and func.id in bindings:
        module, name = bindings[func.id]
        return (module, name) if name else None
    if isinstance(func, ast.Attribute):
        chain = []
        node = func
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in bindings:
            module, name = bindings[node.id]
            if name is None:
                path = [module, *reversed(chain[1:])]
                return ".".join(path), chain[0]
    return None


def _strict_calls(function: ast.AST) -> set[int]:
    """ids of the Call nodes that are operands of ``==`` in asserts, or the first argument of
    ``assertEqual``, in ``function``."""
    strict = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            for compare in ast.walk(node.test):
                if isinstance(compare, ast.Compare) and all(
                    isinstance(o, ast.Eq) for o in compare.ops
                ):
                    strict.update(id(o) for o in (compare.left, *compare.comparators))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("assertEqual", "assertEquals")
            and node.args
        ):
            strict.update(id(a) for a in node.args[:2])
    return strict


def _parametrized(function: ast.AST) -> list[dict]:
    """The rows of a test's literal ``@pytest.mark.parametrize`` decorators, each
    ``{argument name: value}`` (stacked decorators multiply); ``[{}]`` when there are none."""
    rows: list[dict] = [{}]
    for decorator in getattr(function, "decorator_list", ()):
        if not (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize"
            and len(decorator.args) >= 2
        ):
            continue
        try:
            names = ast.literal_eval(decorator.args[0])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        values = []
        if isinstance(decorator.args[1], (ast.List, ast.Tuple)):
            for element in decorator.args[1].elts:
                try:
                    value = _literal(element)
                except ValueError:
                    continue
                values.append(value if len(names) > 1 else (value,))
        values = [v for v in values if isinstance(v, (list, tuple)) and len(v) == len(names)]
        if values:
            rows = [{**row, **dict(zip(names, v, strict=True))} for row in rows for v in values]
    return rows[:64]


def _argument(node: ast.AST, row: dict):
    """A call argument's value: a literal, or a parametrised name of the test."""
    if isinstance(node, ast.Name) and node.id in row:
        return row[node.id]
    return _literal(node)


def _test_functions(tree: ast.Module):
    """``(qualified name, node)`` of every function in a test module, classes' methods too."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{member.name}", member


def plan_calls(
    base: Mapping[str, bytes],
    reference: Mapping[str, bytes],
    test_files: Mapping[str, bytes],
    fail_to_pass: tuple[str, ...],
    *,
    fresh: int = FRESH_PER_CALL,
    seed: int = 0,
) -> tuple[list[Call], str]:
    """The calls of the check (see the module) and, when there are none, why.

    Returns:
        ``(calls, not_applicable)``: at most :data:`MAX_CALLS` calls, literal ones first.
    """
    repository = _Repository(base)
    changed = set()
    for module, source in _Repository(reference).sources.items():
        before = repository.functions.get(module, {})
        after = _functions(source)
        changed |= {(module, n) for n, dump in after.items() if before.get(n) != dump}
    failing = {
        (i.split("::", 1)[0], i.split("::", 1)[1].split("[", 1)[0].replace("::", "."))
        for i in fail_to_pass
        if "::" in i
    }
    literal: list[Call] = []
    seen = set()
    for path, content in sorted(test_files.items()):
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(content)
        except (SyntaxError, ValueError):
            continue
        bindings = _bindings(tree, repository)
        for qualname, function in _test_functions(tree):
            in_failing = (path, qualname) in failing
            strict = _strict_calls(function)
            rows = _parametrized(function)
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                target = _target(node.func, bindings)
                target = repository.resolve(*target) if target else None
                if target is None or not (in_failing or target in changed):
                    continue
                if any(isinstance(a, ast.Starred) for a in node.args) or any(
                    k.arg is None for k in node.keywords
                ):
                    continue
                for row in rows:
                    try:
                        args = tuple(_argument(a, row) for a in node.args)
                        kwargs = tuple((k.arg, _argument(k.value, row)) for k in node.keywords)
                    except ValueError:
                        continue
                    key = repr((target, args, kwargs))
                    if key in seen:
                        continue
                    seen.add(key)
                    where = f"{path}::{qualname}"
                    literal.append(
                        Call(*target, args, kwargs, strict=id(node) in strict, where=where)
                    )
    if not literal:
        why = (
            "no test calls a function of the repository with literal arguments in a "
            "FAIL_TO_PASS test or one the reference patch changes"
        )
        return [], why
    calls = list(literal)
    by_target: dict[tuple, list[tuple]] = {}
    for call in literal:
        if not call.kwargs:
            by_target.setdefault((call.module, call.function), []).append(call.args)
    for (module, function), seeds in sorted(by_target.items()):
        families = rescaled_inputs(seeds)
        taken = [args for found in families.values() for args in found]  # lists: unhashable
        families["mutated"] = [
            args
            for args in mutate_inputs(seeds, count=fresh * len(seeds), seed=seed)
            if args not in taken
        ]
        for family, found in families.items():
            for args in found:
                where = f"fresh input ({family})"
                calls.append(Call(module, function, args, fresh=True, where=where))
    return calls[:MAX_CALLS], ""


def _payload(
    calls: list[Call],
    *,
    repeat: int,
    roots: list[str],
    unchanged: list[str],
    changed_lines: dict,
    site: str,
) -> bytes:
    codec = Codec()
    config = {
        "calls": [
            {
                "module": c.module,
                "function": c.function,
                "args": codec.encode(list(c.args)),
                "kwargs": codec.encode(dict(c.kwargs)),
            }
            for c in calls
        ],
        "repeat": repeat,
        "timeout_s": CALL_TIMEOUT_S,
        "roots": roots,
        "unchanged": unchanged,
        "changed_lines": changed_lines,
        "site": site,
    }
    program = b"\n".join((HARNESS / part).read_bytes() for part in CALLS_PARTS)
    return json.dumps(config).encode() + b"\n" + program


def run_calls(
    files: Mapping[str, bytes],
    calls: list[Call],
    *,
    repeat: int,
    roots: list[str],
    unchanged: list[str],
    environment: dict | None,
    runtime: str,
    changed_lines: dict | None = None,
) -> list[list] | None:
    """The outcomes of ``calls`` run ``repeat`` times each in a fresh session holding ``files``
    (``results[call][run]``, see ``harness/repository_calls.py``), or None when the process did
    not answer (an exit, a crash, a timeout, a forged answer)."""
    from sandboxes.sessions.client import open_session  # noqa: PLC0415 (Redis on use only)

    nonce = secrets.token_hex(16)
    supervisor = SUPERVISOR.read_bytes()
    header = json.dumps({"nonce": nonce, "supervisor": len(supervisor)}).encode()
    site = SITE_PACKAGES if environment and environment.get("packages") else ""
    payload = _payload(
        calls,
        repeat=repeat,
        roots=roots,
        unchanged=unchanged,
        changed_lines=changed_lines or {},
        site=site,
    )
    timeout_s = 30.0 + CALL_TIMEOUT_S * repeat * min(len(calls), 20)
    with open_session(
        Workspace.from_files(dict(files)),
        limits=grading_limits(timeout_s, writable_bytes=32 * MIB),
        runtime=runtime,
        environment=environment,
    ) as session:
        execution = session.exec(
            f"exec python3 -I -B -c {shlex.quote(BOOT)}",
            stdin=header + b"\n" + supervisor + payload,
            timeout_s=timeout_s,
            output_cap_bytes=7 * 1024**2,
        )
    if execution.status != R.OK:
        return None
    answer = read_answer(execution.stdout, nonce)
    if not answer or not answer.get("ran") or answer.get("refused"):
        return None
    results = answer.get("results")
    if not isinstance(results, list) or len(results) != len(calls):
        return None
    return results


def _decoded(outcome) -> tuple:
    """An outcome as a comparable value: ``("ok", value)`` decoded with exact types."""
    if not isinstance(outcome, list) or not outcome:
        return ("garbled",)
    if outcome[0] == "ok" and len(outcome) == 2:
        try:
            value = Codec().decode(outcome[1])
        except (NotPlainData, ValueError, TypeError, KeyError):
            return ("garbled",)
        return ("ok", _canonical(value))
    if outcome[0] == "raised" and len(outcome) == 2:
        return ("raised", str((outcome[1] or ["?"])[0]))
    return tuple(str(part) for part in outcome)


def _canonical(value):
    """A value that compares by type and content (``1 == True`` and ``1 == 1.0`` kept apart,
    nan equal to itself)."""
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        items = sorted(((repr(_canonical(k)), _canonical(v)) for k, v in value.items()), key=repr)
        return (type(value).__name__, tuple(items))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, tuple(sorted(repr(_canonical(v)) for v in value)))
    return (type(value).__name__, repr(value))


def _same_exception(submission: tuple, reference: tuple, names: list) -> bool:
    return submission[0] == "raised" and reference[0] == "raised" and reference[1] in names


def _show(outcome) -> str:
    if isinstance(outcome, list) and outcome[:1] == ["ok"]:
        try:
            return repr(Codec().decode(outcome[1]))[:VALUE_CHARS]
        except (NotPlainData, ValueError, TypeError, KeyError):
            return "?"
    if isinstance(outcome, list) and outcome[:1] == ["raised"]:
        return f"raised {(outcome[1] or ['?'])[0]}"
    return " ".join(str(p) for p in outcome)[:VALUE_CHARS] if isinstance(outcome, list) else "?"


def judge(
    calls: list[Call], bug: list[list], reference: list[list], submission: list[list] | None
) -> tuple[int, list[dict]]:
    """``(calls checked, mismatches)`` of the submission's outcomes against the bug's and the
    reference's (each run twice; see the module). A mismatch is ``{"call", "from", "got",
    "reference", "bug", "why"}``."""
    checked, mismatches = 0, []
    usable = []
    for index, call in enumerate(calls):
        ref_runs = [_decoded(o) for o in reference[index]]
        bug_runs = [_decoded(o) for o in bug[index]]
        if len(set(ref_runs)) != 1 or ref_runs[0][0] in ("timeout", "import_error", "garbled"):
            continue  # the reference is not deterministic here, or cannot answer
        usable.append((index, call, ref_runs[0], bug_runs[0] if len(set(bug_runs)) == 1 else None))
    if submission is None:
        if usable:
            lost = {
                "call": "(every call)",
                "from": "",
                "got": "no answer",
                "reference": "",
                "bug": "",
            }
            return len(usable), [{**lost, "why": "the submission's calls did not answer"}]
        return 0, []
    # Fresh inputs where the fix changed the outcome (the bug's answer differs from the
    # reference's): an honest fix, however written, agrees with the reference on most of them;
    # a fix right only for the tested inputs (hard-coded bounds, a branch on the tested values,
    # an exception elsewhere) agrees on few.
    changed: dict[str, int] = {}  # per family of fresh inputs (``Call.where``)
    disagreed: dict[str, list] = {}
    for index, call, ref, bug_outcome in usable:
        raw = submission[index] if index < len(submission) and submission[index] else ["garbled"]
        got = _decoded(raw[0])
        checked += 1
        why = ""
        names = raw[0][1] if raw[0][:1] == ["raised"] and len(raw[0]) == 2 else []
        same_as_reference = got == ref or _same_exception(got, ref, names or [])
        if call.fresh and bug_outcome is not None and bug_outcome != ref and ref[0] == "ok":
            changed[call.where] = changed.get(call.where, 0) + 1
            if not same_as_reference:
                disagreed.setdefault(call.where, []).append((index, call, raw))
        if call.strict and not call.fresh and not same_as_reference:
            why = "a value the tests assert differs from the reference's"
        elif not call.fresh and got[0] == "not_plain" and ref[0] == "ok":
            why = f"returns an object that is not plain data ({got[1] if len(got) > 1 else '?'})"
        elif bug_outcome is not None and bug_outcome != ref and got == bug_outcome:
            why = "the bug is still there: the same outcome as the unfixed code"
        if why:
            mismatches.append(
                {
                    "call": call.text(),
                    "from": call.where,
                    "got": _show(raw[0]),
                    "reference": _show(reference[index][0]),
                    "bug": _show(bug[index][0]),
                    "why": why,
                }
            )
    for family, count in changed.items():
        if mismatches or 2 * len(disagreed.get(family, ())) <= count:
            continue  # one reason is enough; a few answers of its own are an honest fix's right
        index, call, raw = disagreed[family][0]
        mismatches.append(
            {
                "call": call.text(),
                "from": call.where,
                "got": _show(raw[0]),
                "reference": _show(reference[index][0]),
                "bug": _show(bug[index][0]),
                "why": (
                    f"right only on the tested inputs: differs from the reference on "
                    f"{len(disagreed[family])} of {count} {family[len('fresh input ') :]} "
                    "fresh inputs whose outcome the fix changed"
                ),
            }
        )
    return checked, mismatches


@dataclass
class Differential:
    """The differential check of one task version (see the module and :func:`differential_for`).

    Attributes:
        base, reference: the task's files and the reference's (``apply_patch(base, patch)``).
        calls: what each side runs; not_applicable: why there are none.
    """

    base: dict[str, bytes]
    reference: dict[str, bytes]
    calls: list[Call]
    not_applicable: str = ""
    roots: list[str] = field(default_factory=lambda: [""])
    _sides: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _code(self, files: Mapping[str, bytes]) -> dict[str, bytes]:
        return {p: bytes(c) for p, c in files.items() if not is_test_path(p)}

    def sides(self, environment: dict | None, runtime: str) -> tuple[list, list] | None:
        """The bug's and the reference's outcomes (each call twice), run once per environment
        and kept; None when either side did not answer."""
        key = str((environment or {}).get("key", "")) + "@" + runtime
        with self._lock:
            if key not in self._sides:
                self._sides[key] = tuple(
                    run_calls(
                        self._code(files),
                        self.calls,
                        repeat=2,
                        roots=self.roots,
                        unchanged=sorted(self._code(files)),
                        environment=environment,
                        runtime=runtime,
                    )
                    for files in (self.base, self.reference)
                )
            bug, reference = self._sides[key]
        return None if bug is None or reference is None else (bug, reference)

    def check(self, files: Mapping[str, bytes], *, environment: dict | None, runtime: str) -> dict:
        """The check of a submission's final ``files``: ``{"calls", "checked", "mismatches",
        "not_applicable"}``."""
        if not self.calls:
            return {
                "calls": 0,
                "checked": 0,
                "mismatches": [],
                "not_applicable": self.not_applicable,
            }
        sides = self.sides(environment, runtime)
        if sides is None:
            why = "the task's or the reference's calls did not answer in this environment"
            return {"calls": len(self.calls), "checked": 0, "mismatches": [], "not_applicable": why}
        code = self._code(files)
        unchanged = sorted(p for p, c in code.items() if self.base.get(p) == c)
        changed_lines = {
            p: written_lines(self.base[p], c)
            for p, c in code.items()
            if p in self.base and self.base[p] != c and p.endswith(".py")
        }
        submission = run_calls(
            code,
            self.calls,
            repeat=1,
            roots=self.roots,
            unchanged=unchanged,
            environment=environment,
            runtime=runtime,
            changed_lines=changed_lines,
        )
        checked, mismatches = judge(self.calls, *sides, submission)
        return {
            "calls": len(self.calls),
            "checked": checked,
            "mismatches": mismatches[:EVIDENCE_ITEMS],
            "not_applicable": "" if checked else "no call had a deterministic reference",
        }

    def apply(
        self,
        result: RepositoryResult,
        files: Mapping[str, bytes],
        *,
        environment: dict | None,
        runtime: str,
    ) -> None:
        """Check ``files`` and record it on ``result``; a mismatch fails every FAIL_TO_PASS id
        (the fix is not the reference's where the tests look) and raises
        ``differential_mismatch``."""
        report = self.check(files, environment=environment, runtime=runtime)
        result.differential = report
        if report["mismatches"]:
            first = report["mismatches"][0]
            message = (
                f"differs from the reference: {first['call']} -> {first['got']} ({first['why']})"
            )
            for test_id in result.fail_to_pass:
                if result.per_id.get(test_id) == "passed":  # pytest's own failure says more
                    result.per_id[test_id] = "failed"
                    result.messages[test_id] = message[:500]
            result.flags.append("differential_mismatch")
            result.detail = (result.detail + "; " if result.detail else "") + message


_CACHE: dict[str, Differential] = {}
_CACHE_LOCK = threading.Lock()


def differential_for(base: Mapping[str, bytes], reference_patch: str, tests) -> Differential:
    """The :class:`Differential` of a task version (its files, its reference patch, its
    :class:`~sandboxes.repository.grading.RepositoryTests`), made once per content and kept
    in this process (its bug's and reference's outcomes with it).

    Raises:
        PatchError: the reference patch does not apply.
    """
    digest = hashlib.sha256()
    for path in sorted(base):
        digest.update(path.encode() + b"\0" + bytes(base[path]) + b"\0")
    digest.update(reference_patch.encode())
    digest.update(repr(sorted(tests.ids)).encode())
    key = digest.hexdigest()
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    reference = apply_patch(base, reference_patch)
    test_files = {**tests.test_files, **tests.hidden_files}
    calls, why = plan_calls(base, reference, test_files, tests.fail_to_pass)
    roots = _Repository(base).roots
    made = Differential(dict(base), dict(reference), calls, why, roots)
    with _CACHE_LOCK:
        return _CACHE.setdefault(key, made)
