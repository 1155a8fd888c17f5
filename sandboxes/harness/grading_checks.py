"""Checks of a repository grading's pytest process (part of the runner, after
``grading_trust.py`` and ``grading_guard.py``): comparisons that cannot be faked, and what the
tests run.

* :func:`fake_equality` / :func:`install_comparison_guards`: every ``assert`` comparison in the
  task's test files and every ``unittest`` comparison method checks its operands first; a
  value whose class is not a builtin's and that equals (or contains) an unrelated object (a
  fresh sentinel, a random string, integer or float), or differs from nothing, fails the
  test. Operands the test itself fixed (literals, module-level names bound to the standard
  library's or pytest's objects such as ``mock.ANY``, locals assigned only from those) are
  left alone.
* :func:`item_code`, :func:`test_module_imports`, :func:`foreign_plugins`: the code a test item
  runs (the function, everything it wraps, its class's bases), the machinery its module
  imported, and every plugin and hook implementation, judged by :class:`Trust`, with no
  exemption a submission can claim (a ``__wrapped__`` attribute, a claimed ``__module__``).
"""

import ast
import builtins
import functools
import secrets
import sys
import types
import unittest

try:  # on the host (tests); in the sandbox grading_trust's source comes first
    from sandboxes.harness.grading_trust import Trust, _isinstance, _type
except ImportError:
    pass

UNITTEST_COMPARISONS = (
    "assertEqual",
    "assertNotEqual",
    "assertIn",
    "assertNotIn",
    "assertListEqual",
    "assertTupleEqual",
    "assertDictEqual",
    "assertSetEqual",
    "assertSequenceEqual",
    "assertMultiLineEqual",
    "assertCountEqual",
    "assertAlmostEqual",
    "assertNotAlmostEqual",
    "assertGreater",
    "assertGreaterEqual",
    "assertLess",
    "assertLessEqual",
)
PLAIN_TYPES = (int, float, str, bytes, bool, complex, type(None))
GUARD_NAME = "__crucible_checked__"
TEST_MACHINERY = ("_pytest", "pytest", "pluggy", "unittest")
PROBE_ITEMS = 1000  # items of a list, tuple, set or dict looked into


class _Sentinel:
    """An object nothing honest compares equal to."""

    __slots__ = ()


def _probes(value):
    probes = [_Sentinel(), secrets.token_hex(6), secrets.randbits(61) + 7, secrets.randbits(40) / 7]
    if _isinstance(value, int):
        own = int.__int__(value)
        probes += [n for n in (own + 1 + secrets.randbelow(997), own - 1 - secrets.randbelow(997))]
    if _isinstance(value, str):
        own = str.__str__(value)
        probes += [own + secrets.token_hex(2), secrets.token_hex(max(1, len(own) // 2))[: len(own)]]
    return probes


def fake_equality(value, depth=0):
    """Why ``value`` fakes a comparison, or ``""``: an object that is not a plain builtin value
    (a subclass of one counts) and equals an unrelated probe, differs from nothing, or
    contains a fresh sentinel; items of lists, tuples, sets and dicts are looked into (to
    depth 3)."""
    kind = _type(value)
    if kind in PLAIN_TYPES:
        return ""
    if kind in (list, tuple, set, frozenset):
        if depth < 3:
            for item in list(value)[:PROBE_ITEMS]:
                why = fake_equality(item, depth + 1)
                if why:
                    return why
        return ""
    if kind is dict:
        if depth < 3:
            for key, item in list(dict.items(value))[:PROBE_ITEMS]:
                why = fake_equality(key, depth + 1) or fake_equality(item, depth + 1)
                if why:
                    return why
        return ""
    name = getattr(kind, "__qualname__", "an object")
    for probe in _probes(value):
        try:
            if value == probe:
                return f"{name} equals an unrelated {_type(probe).__name__}"
            if not (value != probe):
                return f"{name} differs from nothing"
        except Exception:  # noqa: BLE001 - an honest __eq__ may refuse a stranger
            continue
    if any("__contains__" in vars(k) for k in kind.__mro__[:-1]):
        try:
            if _Sentinel() in value:
                return f"{name} contains a fresh sentinel"
        except Exception:  # noqa: BLE001 - an honest container may refuse it too
            pass
    return ""


def checked(value):
    """The guard every guarded comparison operand goes through."""
    why = fake_equality(value)
    if why:
        raise AssertionError(f"a value that fakes comparisons: {why}")
    return value


class _Constants(ast.NodeVisitor):
    """Names a test module or function fixed itself: bound by an import of the standard
    library or pytest, or assigned only from literals and such names."""

    def __init__(self, trusted_roots, outer=frozenset()):
        self.trusted_roots = trusted_roots
        self.outer = set(outer)
        self.assigned: dict[str, bool] = {}

    def constant(self, node):
        if _isinstance(node, ast.Constant):
            return True
        if _isinstance(node, ast.Name):
            return node.id in self.outer or self.assigned.get(node.id, False)
        if _isinstance(node, ast.Attribute):
            return self.constant(node.value)
        if _isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self.constant(e) for e in node.elts)
        if _isinstance(node, ast.Dict):
            return all(k is None or self.constant(k) for k in node.keys) and all(
                self.constant(v) for v in node.values
            )
        if _isinstance(node, ast.UnaryOp):
            return self.constant(node.operand)
        return False

    def bind(self, target, constant):
        if _isinstance(target, ast.Name):
            self.assigned[target.id] = self.assigned.get(target.id, True) and constant
        elif _isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element, False)

    def visit_Import(self, node):
        for alias in node.names:
            root = alias.name.split(".", 1)[0]
            name = (alias.asname or alias.name).split(".", 1)[0]
            self.assigned[name] = self.assigned.get(name, True) and root in self.trusted_roots

    def visit_ImportFrom(self, node):
        root = (node.module or "").split(".", 1)[0]
        for alias in node.names:
            name = alias.asname or alias.name
            trusted = node.level == 0 and root in self.trusted_roots
            self.assigned[name] = self.assigned.get(name, True) and trusted

    def visit_Assign(self, node):
        for target in node.targets:
            self.bind(target, self.constant(node.value))

    def visit_AnnAssign(self, node):
        self.bind(node.target, node.value is not None and self.constant(node.value))

    def visit_AugAssign(self, node):
        self.bind(node.target, False)

    def visit_For(self, node):
        self.bind(node.target, False)
        self.generic_visit(node)

    def visit_With(self, node):
        for item in node.items:
            if item.optional_vars is not None:
                self.bind(item.optional_vars, False)
        self.generic_visit(node)

    def visit_NamedExpr(self, node):
        self.bind(node.target, False)

    def visit_FunctionDef(self, node):
        self.assigned.setdefault(node.name, False)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.assigned.setdefault(node.name, False)

    def names(self):
        return {name for name, constant in self.assigned.items() if constant} | self.outer


def _trusted_roots():
    roots = set(getattr(sys, "stdlib_module_names", ())) | {"pytest", "_pytest", "unittest"}
    return frozenset(roots)


class GuardOperands(ast.NodeTransformer):
    """Wraps the comparison operands of ``assert`` statements in :data:`GUARD_NAME`, but for
    those the test fixed itself (:class:`_Constants`); containers written in the test have
    their items wrapped instead, so an ``ANY`` among literals stays a literal."""

    def __init__(self):
        self.roots = _trusted_roots()
        self.scopes = []

    def visit_Module(self, node):
        constants = _Constants(self.roots)
        for statement in node.body:
            constants.visit(statement)
        self.scopes.append(constants.names())
        self.generic_visit(node)
        self.scopes.pop()
        return node

    def visit_FunctionDef(self, node):
        constants = _Constants(self.roots, self.scopes[-1] if self.scopes else ())
        for argument in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            constants.assigned[argument.arg] = False
        for statement in node.body:
            constants.visit(statement)
        names = constants.names() - {
            a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
        }
        self.scopes.append(names)
        self.generic_visit(node)
        self.scopes.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assert(self, node):
        for child in ast.walk(node.test):
            if _isinstance(child, ast.Compare):
                child.left = self._wrap(child.left)
                child.comparators = [self._wrap(c) for c in child.comparators]
        return node

    def _fixed(self, expr):
        names = self.scopes[-1] if self.scopes else set()
        checker = _Constants(self.roots, names)
        return checker.constant(expr)

    def _wrap(self, expr):
        if self._fixed(expr):
            return expr
        if _isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            expr.elts = [self._wrap(e) for e in expr.elts]
            return expr
        if _isinstance(expr, ast.Dict):
            expr.keys = [k if k is None else self._wrap(k) for k in expr.keys]
            expr.values = [self._wrap(v) for v in expr.values]
            return expr
        call = ast.Call(func=ast.Name(id=GUARD_NAME, ctx=ast.Load()), args=[expr], keywords=[])
        return ast.copy_location(call, expr)


def install_comparison_guards(is_test_file):
    """Guard ``assert`` comparisons of the task's test files (``is_test_file(path)``), through
    pytest's assertion rewriter before it rewrites a test module, and unittest's comparison
    methods; the guard is ``builtins.__crucible_checked__``."""
    import _pytest.assertion.rewrite as rewrite  # noqa: PLC0415 - imported already

    setattr(builtins, GUARD_NAME, checked)
    original = rewrite.rewrite_asserts

    def rewrite_asserts(mod, source, module_path=None, config=None):
        if module_path is not None and is_test_file(str(module_path)):
            GuardOperands().visit(mod)
            ast.fix_missing_locations(mod)
        return original(mod, source, module_path, config)

    rewrite.rewrite_asserts = rewrite_asserts

    def guarded(method):
        def check(self, *args, **kwargs):
            for value in args[:2]:
                checked(value)
            return method(self, *args, **kwargs)

        check.__name__, check.__qualname__ = method.__name__, method.__qualname__
        check.__doc__ = method.__doc__
        return check

    for name in UNITTEST_COMPARISONS:
        setattr(unittest.TestCase, name, guarded(getattr(unittest.TestCase, name)))


def test_module_imports(trust, machinery, rewrite_module):
    """Names in the task's test modules bound to a machinery module or object that is not the
    real one (a ``pytest`` or ``TestCase`` swapped through ``sys.modules`` or
    ``builtins.__import__``), pytest's own ``@py_builtins``/``@pytest_ar`` replaced, or the
    comparison guard shadowed."""
    found = []
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None) or ""
        if not _isinstance(where, str) or not trust.is_test_file(where):
            continue
        namespace = vars(module)
        if GUARD_NAME in namespace:
            found.append(f"{module.__name__} shadows the comparison guard")
        for name, real in (("@py_builtins", builtins), ("@pytest_ar", rewrite_module)):
            if name in namespace and namespace[name] is not real:
                found.append(f"{module.__name__}.{name} is not pytest's")
        for name, value in list(namespace.items()):
            if _isinstance(value, types.ModuleType):
                claimed = getattr(value, "__name__", "")
                if claimed in machinery.modules and value is not machinery.modules[claimed]:
                    found.append(f"{module.__name__}.{name} is not the real {claimed}")
                continue
            owner = getattr(value, "__module__", None)
            # Only the test machinery's names: wrappers of builtins (``curry(filter)``) are the
            # project's business, and claim ``builtins`` honestly.
            if (
                _isinstance(owner, str)
                and owner in machinery.modules
                and owner.split(".", 1)[0] in TEST_MACHINERY
            ):
                qualname = getattr(value, "__qualname__", "")
                real = machinery.real(owner, qualname) if _isinstance(qualname, str) else None
                if real is not None and value is not real:
                    found.append(f"{module.__name__}.{name} is not the real {owner}.{qualname}")
    return found


def item_code(trust, machinery, item):
    """What is untrusted about the code a test item runs: the function and everything it
    wraps (``__wrapped__``, ``functools.partial``), and its class's bases."""
    found = []
    function = getattr(item, "obj", None)
    for _ in range(20):
        if function is None:
            break
        function = getattr(function, "__func__", function)
        code = getattr(function, "__code__", None)
        if code is not None:
            if trust.of_code(code) == Trust.UNTRUSTED:
                found.append(f"{item.nodeid} runs {code.co_filename}")
        elif not _isinstance(function, types.BuiltinFunctionType):
            call = getattr(_type(function), "__call__", None)  # noqa: B004 - the code it runs
            inner = getattr(call, "__code__", None)
            if inner is not None and trust.of_code(inner) == Trust.UNTRUSTED:
                found.append(f"{item.nodeid} is an object whose call runs {inner.co_filename}")
        partial = function.func if _type(function) is functools.partial else None
        function = getattr(function, "__wrapped__", None) or partial
    klass = getattr(item, "cls", None)
    for base in getattr(klass, "__mro__", ())[1:]:
        module = getattr(base, "__module__", "")
        if module in machinery.modules:
            if machinery.real(module, base.__qualname__) is not base:
                found.append(f"{item.nodeid}: its base {module}.{base.__qualname__} is not real")
            continue
        for member in list(vars(base).values()):
            code = getattr(getattr(member, "__func__", member), "__code__", None)
            if code is not None and trust.of_code(code) == Trust.UNTRUSTED:
                found.append(f"{item.nodeid}: its base {base.__qualname__} runs {code.co_filename}")
                break
    return found


def plugin_origin(plugin):
    """The file a plugin's code comes from (``<no file>`` when it cannot be told)."""
    if _isinstance(plugin, types.ModuleType):
        return getattr(plugin, "__file__", None) or "<no file>"
    kind = plugin if _isinstance(plugin, type) else _type(plugin)
    defining = sys.modules.get(getattr(kind, "__module__", ""), None)
    return getattr(defining, "__file__", None) or "<no file>"


def foreign_plugins(trust, config, reporter):
    """Plugins and hook implementations whose code is untrusted (the workspace's changed or
    added files, code made at run time, ``/tmp``); the grading's own ``reporter`` is checked
    to still be itself."""
    found = []
    for name, plugin in config.pluginmanager.list_name_plugin():
        if plugin is None or plugin is reporter:
            continue
        where = plugin_origin(plugin)
        if trust.added(where):  # a changed file's plugin is judged by its hooks' code below
            found.append(f"plugin {name!r} ({_type(plugin).__name__}) from {where}")
    for hook_name in dir(config.hook):
        caller = getattr(config.hook, hook_name, None)
        for impl in getattr(caller, "get_hookimpls", lambda: [])():
            code = getattr(getattr(impl, "function", None), "__code__", None)
            if code is None or trust.of_code(code) == Trust.UNTRUSTED:
                where = code.co_filename if code is not None else "an object"
                found.append(f"hook {hook_name} from {where}")
    return sorted(set(found))[:20]
