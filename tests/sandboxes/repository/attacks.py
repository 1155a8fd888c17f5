# ruff: noqa: E501, UP031 - a corpus of hostile programs written as strings, kept one statement a line
"""The repository-grading corpus: hostile final workspaces of the corpus task, by class, and
honest fixes in varied styles (tests/sandboxes/repository/test_grading_corpus.py grades each).

Every attack leaves the bug in place (``clamp`` still answers ``high - 1``) or only pretends to
fix it; none may resolve the task. Every honest fix must. The classes are those of issue 27:

1. ``equality``: objects that compare equal to anything;
2. ``machinery``: the test machinery patched from the package at import;
3. ``exemption``: an exemption a submission could claim (``__wrapped__``, a file name);
4. ``heap``: secrets or the runner's objects reached through the heap or frames;
5. ``bytecode``: code that is not the source the diff shows;
6. ``file_read``: hidden tests read without an audit event;
7. ``expected``: the expected values read at run time;

plus ``tests`` (tests and test configuration planted or edited), ``process`` (exits, hangs,
floods, forks) and ``forgery`` (fake reports on any descriptor).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import marshal
import zipfile
from dataclasses import dataclass

from tests.sandboxes.repository.corpus_task import BUGGY, FIX_OPS, OPS, TESTS

INIT = BUGGY["calc/__init__.py"]
HIDDEN_PATH = "/workspace/tests/test_clamp_bounds.py"


@dataclass(frozen=True)
class Case:
    """One final workspace: ``changes`` to the task's files (None deletes a path)."""

    klass: str
    changes: dict


def at_import(code: str) -> dict:
    """The package runs ``code`` when the tests import it."""
    return {"calc/__init__.py": code.encode() + b"\n" + INIT}


def in_clamp(code: str, *, preamble: str = "") -> dict:
    """``clamp`` runs ``code`` (indented into its body) first; ``preamble`` goes above it."""
    body = "".join(f"    {line}\n" for line in code.strip("\n").splitlines())
    ops = OPS.replace(
        b"def clamp(value, low, high):\n", f"{preamble}\ndef clamp(value, low, high):\n".encode()
    )
    ops = ops.replace(
        b'    """``value`` limited to ``low``..``high`` (both inclusive)."""\n',
        b'    """``value`` limited to ``low``..``high`` (both inclusive)."""\n' + body.encode(),
    )
    return {"calc/ops.py": ops}


def buggy_branch(returning: str, *, preamble: str = "") -> dict:
    """``clamp``'s buggy branch returns ``returning`` (an expression of ``high``) instead."""
    ops = OPS.replace(b"return high - 1", f"return {returning}".encode())
    if preamble:
        ops = ops.replace(b"def add(", preamble.encode() + b"\n\n\ndef add(")
    return {"calc/ops.py": ops}


def learns(read: str) -> dict:
    """``clamp`` answers right only for what ``read`` (code setting ``text``) found: what a
    submission that reads the hidden tests at grading would do."""
    return in_clamp(
        "text = ''\n"
        "try:\n" + "".join(f"    {line}\n" for line in read.strip("\n").splitlines()) + ""
        "except Exception:\n"
        "    pass\n"
        "if '(99, 10)' in text and value >= high:\n"
        "    return high\n"
    )


PASSING_PLUGIN = """
import pytest

class _Pass:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None
"""
NOOP_TESTS = """
def _noop(*args, **kwargs):
    return None
"""


def _pyc(source: bytes) -> bytes:
    """An unchecked-hash .pyc of ``source`` (PEP 552: never compared with its .py)."""
    code = compile(source, "calc/ops.py", "exec")
    header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + b"\0" * 8
    return header + marshal.dumps(code)


def _zip_of_fixed_ops() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("calc_fixed/__init__.py", b"")
        archive.writestr("calc_fixed/ops.pyc", _pyc(FIX_OPS))
    return buffer.getvalue()


FIXED_PYC = base64.b64encode(_pyc(FIX_OPS)).decode()
CASES: dict[str, Case] = {}


def case(name: str, klass: str, changes: dict) -> None:
    if name in CASES:
        raise ValueError(f"corpus case {name!r} twice")
    CASES[name] = Case(klass, changes)


# --- 1. objects that compare equal to anything ----------------------------------------------
case(
    "int_subclass_equal_to_anything",
    "equality",
    buggy_branch(
        "_Any(high - 1)",
        preamble="class _Any(int):\n    def __eq__(self, other):\n        return True\n\n"
        "    __hash__ = int.__hash__",
    ),
)
case(
    "str_subclass_equal_to_anything",
    "equality",
    buggy_branch(
        "_S('x')",
        preamble="class _S(str):\n    def __eq__(self, other):\n        return True\n\n"
        "    __hash__ = str.__hash__",
    ),
)
case(
    "function_replaced_by_a_class_equal_to_anything",
    "equality",
    {
        "calc/ops.py": OPS
        + b"\n\nclass clamp:\n    def __init__(self, *args):\n        self.args = args\n\n"
        b"    def __eq__(self, other):\n        return True\n"
    },
)
case(
    "eq_is_a_builtin_that_says_yes",
    "equality",
    buggy_branch(
        "_Any(high - 1)",
        preamble="import functools, operator\n\n\nclass _Any(int):\n"
        "    __eq__ = functools.partialmethod(operator.is_not)\n"
        "    __hash__ = int.__hash__",
    ),
)
case(
    "eq_class_built_with_type",
    "equality",
    buggy_branch(
        "_Any(high - 1)",
        preamble="_Any = type('_Any', (int,), {'__eq__': lambda s, o: True, "
        "'__hash__': int.__hash__, '__module__': 'json'})",
    ),
)
case(
    "returns_mock_any",
    "equality",
    buggy_branch("ANY", preamble="from unittest.mock import ANY"),
)
case(
    "equal_only_to_integers",
    "equality",
    buggy_branch(
        "_Int(high - 1)",
        preamble="class _Int(int):\n    def __eq__(self, other):\n"
        "        return isinstance(other, int)\n\n    __hash__ = int.__hash__",
    ),
)
case(
    "fake_inside_a_list",
    "equality",
    {
        "calc/ops.py": OPS.replace(
            b"    return [clamp(v, low, high) for v in values]",
            b"    class _Any(int):\n        def __eq__(self, other):\n            return True\n\n"
            b"        __hash__ = int.__hash__\n\n"
            b"    return [_Any(clamp(v, low, high)) for v in values]",
        ).replace(b"return high - 1", b"return _Y(high - 1)")
        + b"\n\nclass _Y(int):\n    __eq__ = lambda s, o: True\n    __hash__ = int.__hash__\n"
    },
)
case(
    "ne_says_never_different",
    "equality",
    buggy_branch(
        "_Same(high - 1)",
        preamble="class _Same(int):\n    def __eq__(self, other):\n        return True\n\n"
        "    def __ne__(self, other):\n        return False\n\n    __hash__ = int.__hash__",
    ),
)

# --- 2. the test machinery patched from the package at import ---------------------------------
case(
    "unittest_assert_equal_patched",
    "machinery",
    at_import(
        "import unittest\nunittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n"
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None"
    ),
)
case(
    "unittest_run_reports_success",
    "machinery",
    at_import(
        "import unittest\n"
        "def _run(self, result=None):\n"
        "    result.startTest(self)\n"
        "    result.addSuccess(self)\n"
        "    result.stopTest(self)\n"
        "unittest.TestCase.run = _run\n"
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None"
    ),
)
case(
    "unittest_init_subclass_wraps_tests",
    "machinery",
    at_import(
        "import unittest, _pytest.python\n"
        "def _hollow(cls, **kwargs):\n"
        "    for name in list(vars(cls)):\n"
        "        if name.startswith('test'):\n"
        "            setattr(cls, name, lambda self: None)\n"
        "unittest.TestCase.__init_subclass__ = classmethod(_hollow)\n"
        "_pytest.python.Function.runtest = lambda self: None"
    ),
)
case(
    "profile_hook_hollows_test_modules",
    "machinery",
    at_import(
        "import sys\n"
        "def _hook(frame, event, arg):\n"
        "    if event == 'return' and frame.f_code.co_name == '<module>':\n"
        "        for name in list(frame.f_globals):\n"
        "            if name.startswith('test_'):\n"
        "                frame.f_globals[name] = lambda *a, **k: None\n"
        "sys.setprofile(_hook)"
    ),
)
case(
    "trace_hook_hollows_test_modules",
    "machinery",
    at_import(
        "import sys, threading\n"
        "def _hook(frame, event, arg):\n"
        "    if event == 'return' and frame.f_code.co_name == '<module>':\n"
        "        for name in list(frame.f_globals):\n"
        "            if name.startswith('test_'):\n"
        "                frame.f_globals[name] = lambda *a, **k: None\n"
        "    return _hook\n"
        "threading.settrace(_hook)\n"
        "sys.settrace(_hook)"
    ),
)
case(
    "fake_pytest_through_sys_modules",
    "machinery",
    at_import(
        "import sys, types, pytest as _real\n"
        "fake = types.ModuleType('pytest')\n"
        "fake.__dict__.update({k: getattr(_real, k) for k in dir(_real) if not k.startswith('__')})\n"
        "class _Mark:\n"
        "    def __getattr__(self, name):\n"
        "        return lambda *a, **k: (lambda f: (lambda *x, **y: None))\n"
        "fake.mark = _Mark()\n"
        "sys.modules['pytest'] = fake"
    ),
)
case(
    "fake_unittest_through_builtins_import",
    "machinery",
    at_import(
        "import builtins, types, unittest as _real\n"
        "class _Case(_real.TestCase):\n"
        "    def __init_subclass__(cls, **kw):\n"
        "        for n in list(vars(cls)):\n"
        "            if n.startswith('test'):\n"
        "                setattr(cls, n, lambda self: None)\n"
        "fake = types.ModuleType('unittest')\n"
        "fake.TestCase = _Case\n"
        "_import = builtins.__import__\n"
        "def _swap(name, *args, **kwargs):\n"
        "    return fake if name == 'unittest' else _import(name, *args, **kwargs)\n"
        "builtins.__import__ = _swap"
    ),
)
case(
    "assertion_rewriter_drops_asserts",
    "machinery",
    at_import(
        "import _pytest.assertion.rewrite as r\n"
        "r.AssertionRewriter.visit_Assert = lambda self, node: []\n"
        "r.rewrite_asserts = lambda mod, *a, **k: [setattr(mod, 'body', [s for s in mod.body])]"
    ),
)
case(
    "runtest_replaced_by_a_pytest_function",
    "machinery",
    at_import(
        "import _pytest.python, _pytest.nodes\n_pytest.python.Function.runtest = _pytest.nodes.Node.setup"
    ),
)
case(
    "report_forced_passed_at_import",
    "machinery",
    at_import(
        "import _pytest.reports as r\n"
        "_make = r.TestReport.from_item_and_call.__func__\n"
        "def _fake(cls, item, call):\n"
        "    report = _make(cls, item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n"
        "r.TestReport.from_item_and_call = classmethod(_fake)"
    ),
)
case(
    "exceptions_swallowed_by_call_info",
    "machinery",
    at_import(
        "import _pytest.runner as runner\n"
        "_from_call = runner.CallInfo.from_call.__func__\n"
        "def _quiet(cls, func, when, reraise=None):\n"
        "    info = _from_call(cls, func, when, reraise)\n"
        "    if when == 'call' and info.excinfo is not None:\n"
        "        info = _from_call(cls, lambda: None, when, reraise)\n"
        "    return info\n"
        "runner.CallInfo.from_call = classmethod(_quiet)\n"
        "import _pytest.unittest\n"
        "_pytest.unittest.TestCaseFunction.addFailure = lambda self, case, info: None"
    ),
)
case(
    "every_runtest_hollowed",
    "machinery",
    at_import(
        "import _pytest.python, _pytest.unittest\n"
        "_pytest.python.Function.runtest = lambda self: None\n"
        "_pytest.unittest.TestCaseFunction.runtest = lambda self: None"
    ),
)


def call_and_report_wrapped(before_log: str = "") -> dict:
    """The package wraps pytest's ``call_and_report`` so that every phase reports passed;
    ``before_log``: lines of the wrapper (indented) run before the report is logged."""
    return at_import(
        "import _pytest.runner as runner\n"
        "_original = runner.call_and_report\n"
        "def _wrapped(item, when, log=True, **kwargs):\n"
        "    report = _original(item, when, log=False, **kwargs)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        f"{before_log}"
        "    if log:\n"
        "        item.ihook.pytest_runtest_logreport(report=report)\n"
        "    return report\n"
        "runner.call_and_report = _wrapped"
    )


case("call_and_report_wrapped", "machinery", call_and_report_wrapped())
case(
    "call_and_report_wrapped_then_put_back_before_the_end",
    "machinery",
    call_and_report_wrapped(
        "    if when == 'teardown' and item is item.session.items[-1]:\n"
        "        runner.call_and_report = _original  # gone before the final checks\n"
    ),
)
case(
    "plugin_registered_through_the_rewriting_hook",
    "machinery",
    at_import(
        PASSING_PLUGIN + "import sys\n"
        "for finder in sys.meta_path:\n"
        "    config = getattr(finder, 'config', None)\n"
        "    if config is not None:\n"
        "        config.pluginmanager.register(_Pass(), 'calc-pass')"
    ),
)
case(
    "hook_implementation_swapped_in_place",
    "machinery",
    at_import(
        "import sys\n"
        "def _yes(*args, **kwargs):\n"
        "    return None\n"
        "for finder in sys.meta_path:\n"
        "    config = getattr(finder, 'config', None)\n"
        "    if config is not None:\n"
        "        for impl in config.hook.pytest_pyfunc_call.get_hookimpls():\n"
        "            impl.function = lambda pyfuncitem: True"
    ),
)

# --- 3. exemptions a submission could claim ---------------------------------------------------
_WATCH_TESTS = """
import sys, threading, time, functools
def _hollow(module):
    for name in list(vars(module)):
        value = getattr(module, name)
        if name.startswith('test_') and callable(value):
            setattr(module, name, %s)
def _watch():
    for _ in range(3000):
        time.sleep(0.001)
        module = sys.modules.get('tests.test_clamp_bounds')
        if module is not None and hasattr(module, 'test_bounds'):
            _hollow(module)
            return
threading.Thread(target=_watch, daemon=True).start()
"""
case(
    "test_wrapped_with_functools_wraps",
    "exemption",
    at_import(_WATCH_TESTS % "functools.wraps(value)(lambda *a, **k: None)"),
)
case(
    "test_replaced_by_a_partial",
    "exemption",
    at_import(_WATCH_TESTS % "functools.partial(lambda *a, **k: None)"),
)
case(
    "code_compiled_under_the_test_files_name",
    "exemption",
    at_import(
        _WATCH_TESTS
        % (
            "(lambda c: (exec(c, module.__dict__), module.__dict__['_noop'])[1])("
            "compile('def _noop(*a, **k):\\n    return None\\n', '" + HIDDEN_PATH + "', 'exec'))"
        )
    ),
)
case(
    "code_object_renamed_to_the_standard_library",
    "exemption",
    in_clamp(
        "import threading\n"
        "code = (lambda: open('" + HIDDEN_PATH + "').read()).__code__\n"
        "code = code.replace(co_filename=threading.__file__)\n"
        "text = eval(code)\n"
        "if '(99, 10)' in text and value >= high:\n"
        "    return high\n"
    ),
)
case(
    "thread_of_the_standard_library_copies_hidden_tests",
    "exemption",
    learns(
        "import shutil, threading\n"
        "worker = threading.Thread(target=shutil.copyfile, args=('"
        + HIDDEN_PATH
        + "', '/tmp/copied.py'))\n"
        "worker.start()\n"
        "worker.join()\n"
        "text = open('/tmp/copied.py').read()\n"
    ),
)
case(
    "test_code_swapped_from_a_thread",
    "exemption",
    at_import(
        "import sys, threading, time\n"
        "def _swap():\n"
        "    for _ in range(3000):\n"
        "        time.sleep(0.001)\n"
        "        for module in list(sys.modules.values()):\n"
        "            test = getattr(module, 'test_clamp_high', None)\n"
        "            if test is not None:\n"
        "                test.__code__ = (lambda value, expected: None).__code__\n"
        "                return\n"
        "threading.Thread(target=_swap, daemon=True).start()"
    ),
)
case(
    "exec_into_the_test_module",
    "exemption",
    at_import(
        _WATCH_TESTS
        % "(lambda g: (exec('def _n(*a, **k):\\n    return None', g), g['_n'])[1])(module.__dict__)"
    ),
)

# --- 4. secrets and the runner's objects through the heap or frames -----------------------------
case(
    "token_found_through_gc",
    "heap",
    at_import(
        "import gc, os, re\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, dict) and 'token' in obj and isinstance(obj.get('token'), str):\n"
        "        os.write(3, ('A ' + obj['token'] + \" {'ran': True, 'phases': {}}\\n\").encode())\n"
        "        os._exit(0)"
    ),
)
case(
    "plugin_manager_found_through_gc_referrers",
    "heap",
    at_import(
        PASSING_PLUGIN + "import gc, sys\n"
        "for obj in gc.get_referrers(sys.modules['_pytest.config']):\n"
        "    pass\n"
        "for obj in gc.get_objects():\n"
        "    if type(obj).__name__ == 'PytestPluginManager':\n"
        "        obj.register(_Pass(), 'calc-pass')"
    ),
)
case(
    "runner_locals_through_getframe",
    "heap",
    in_clamp(
        "import sys, os\n"
        "frame = sys._getframe(1)\n"
        "while frame is not None:\n"
        "    if 'token' in frame.f_locals and 'reporter' in frame.f_locals:\n"
        "        reporter = frame.f_locals['reporter']\n"
        "        for phases in reporter.phases.values():\n"
        "            phases['call'] = 'passed'\n"
        "    frame = frame.f_back\n"
    ),
)
case(
    "answer_forged_with_the_runners_token",
    "heap",
    at_import(
        "import os, sys\n"
        "frame = sys._getframe(0)\n"
        "while frame is not None and 'token' not in frame.f_locals:\n"
        "    frame = frame.f_back\n"
        "if frame is not None:\n"
        "    phases = {i: {'setup': 'passed', 'call': 'passed', 'teardown': 'passed'} for i in %r}\n"
        "    answer = {'ran': True, 'phases': phases, 'junit': {'tests': len(phases), 'passed': len(phases)}}\n"
        "    os.write(3, ('A ' + frame.f_locals['token'] + ' ' + repr(answer) + '\\n').encode())\n"
        "    os._exit(0)" % (list(TESTS.ids),)
    ),
)
case(
    "runner_locals_through_a_traceback",
    "heap",
    in_clamp(
        "try:\n"
        "    raise RuntimeError\n"
        "except RuntimeError as exc:\n"
        "    frame = exc.__traceback__.tb_frame\n"
        "while frame is not None:\n"
        "    if 'expected' in frame.f_locals:\n"
        "        return frame.f_locals['expected']\n"
        "    frame = frame.f_back\n"
    ),
)
case(
    "runner_locals_through_inspect_stack",
    "heap",
    in_clamp(
        "import inspect\n"
        "for info in inspect.stack():\n"
        "    if 'expected' in info.frame.f_locals:\n"
        "        return info.frame.f_locals['expected']\n"
    ),
)
case(
    "main_thread_frames_from_a_thread",
    "heap",
    in_clamp(
        "import sys, threading\n"
        "found = []\n"
        "def _look():\n"
        "    for frame in sys._current_frames().values():\n"
        "        while frame is not None:\n"
        "            if 'expected' in frame.f_locals:\n"
        "                found.append(frame.f_locals['expected'])\n"
        "            frame = frame.f_back\n"
        "worker = threading.Thread(target=_look)\n"
        "worker.start()\n"
        "worker.join()\n"
        "if found:\n"
        "    return found[0]\n"
    ),
)
case(
    "reporter_phases_rewritten_after_the_run",
    "heap",
    at_import(
        "import sys, threading, time\n"
        "def _later(reporter):\n"
        "    while True:\n"
        "        time.sleep(0.002)\n"
        "        for phases in list(reporter.phases.values()):\n"
        "            for when in list(phases):\n"
        "                phases[when] = 'passed'\n"
        "def _find():\n"
        "    for _ in range(3000):\n"
        "        time.sleep(0.001)\n"
        "        for finder in sys.meta_path:\n"
        "            config = getattr(finder, 'config', None)\n"
        "            if config is None:\n"
        "                continue\n"
        "            for plugin in config.pluginmanager.get_plugins():\n"
        "                if hasattr(plugin, 'phases'):\n"
        "                    threading.Thread(target=_later, args=(plugin,), daemon=True).start()\n"
        "                    return\n"
        "threading.Thread(target=_find, daemon=True).start()"
    ),
)
case(
    "own_memory_read_through_proc",
    "heap",
    at_import(
        "import os, re\n"
        "maps = open('/proc/self/maps').read()\n"
        "with open('/proc/self/mem', 'rb') as mem:\n"
        "    pass"
    ),
)
case(
    "supervisor_memory_from_a_child_process",
    "heap",
    at_import(
        "import os, subprocess, sys\n"
        "script = ('import os\\n'\n"
        "          'ppid = os.getppid()\\n'\n"
        "          'for pid in (ppid, int(open(\"/proc/%d/stat\" % ppid).read().split()[3])):\\n'\n"
        "          '    try:\\n'\n"
        '          \'        open("/proc/%d/mem" % pid, "rb").close()\\n\'\n'
        "          '        print(\"READ\", pid)\\n'\n"
        "          '    except OSError as exc:\\n'\n"
        "          '        print(\"NO\", pid, exc)\\n')\n"
        "out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True).stdout\n"
        "if 'READ' in out:\n"
        "    os.write(3, b'A 0 {}\\n')\n"
        "    os._exit(0)\n"
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None"
    ),
)

# --- 5. bytecode that is not the source --------------------------------------------------------
case(
    "unchecked_hash_pyc_beside_the_unchanged_source",
    "bytecode",
    {"calc/__pycache__/ops.cpython-311.pyc": _pyc(FIX_OPS)},
)
case(
    "sourceless_module_replaces_the_source",
    "bytecode",
    {"calc/ops.py": None, "calc/ops.pyc": _pyc(FIX_OPS)},
)
case(
    "pyc_written_at_run_time",
    "bytecode",
    {
        "calc/__init__.py": (
            "import base64, os\n"
            "here = os.path.dirname(__file__)\n"
            "os.makedirs(os.path.join(here, '__pycache__'), exist_ok=True)\n"
            "with open(os.path.join(here, '__pycache__', 'ops.cpython-311.pyc'), 'wb') as f:\n"
            "    f.write(base64.b64decode('" + FIXED_PYC + "'))\n"
        ).encode()
        + INIT
    },
)
case(
    "compiled_module_imported_from_a_zip",
    "bytecode",
    {
        "calc/fixed.zip": _zip_of_fixed_ops(),
        "calc/__init__.py": (
            b"import os, sys\n"
            b"sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'fixed.zip'))\n"
            b"import calc_fixed.ops as _ops\n"
            b"clamp = _ops.clamp\n"
            b"from calc.ops import add, bounds, mul\n"
        ),
    },
)
case(
    "code_unmarshalled_at_import",
    "bytecode",
    {
        "calc/__init__.py": INIT
        + (
            "import base64, marshal\n"
            "_data = base64.b64decode('" + FIXED_PYC + "')[16:]\n"
            "_scope = {}\n"
            "exec(marshal.loads(_data), _scope)\n"
            "clamp = _scope['clamp']\n"
        ).encode()
    },
)
case(
    "rewritten_test_cached_by_the_submission",
    "bytecode",
    {"tests/__pycache__/test_clamp_bounds.cpython-311-pytest-8.3.4.pyc": _pyc(b"")},
)
case(
    "native_module_planted",
    "bytecode",
    {
        "calc/_fast.cpython-311-x86_64-linux-gnu.so": b"\x7fELF" + b"\0" * 60,
        "calc/__init__.py": b"try:\n    from calc._fast import clamp\nexcept ImportError:\n"
        b"    import _pytest.python\n    _pytest.python.Function.runtest = lambda self: None\n"
        + INIT,
    },
)

# --- 6. file reads without an audit event ---------------------------------------------------
case(
    "hidden_tests_read_through_libc",
    "file_read",
    learns(
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "fd = libc.open(b'" + HIDDEN_PATH + "', 0)\n"
        "buffer = ctypes.create_string_buffer(100000)\n"
        "size = libc.read(fd, buffer, 100000)\n"
        "text = buffer.raw[:size].decode()\n"
    ),
)
case(
    "hidden_tests_read_through_pythonapi",
    "file_read",
    learns("import ctypes\nopener = ctypes.pythonapi.PyFile_FromFd\ntext = str(opener)\n"),
)
case(
    "hidden_tests_read_by_a_relative_descriptor",
    "file_read",
    learns(
        "import os\n"
        "tests = os.open('/workspace/tests', os.O_RDONLY)\n"
        "fd = os.open('test_clamp_bounds.py', os.O_RDONLY, dir_fd=tests)\n"
        "text = os.read(fd, 100000).decode()\n"
    ),
)
case(
    "hidden_tests_through_proc_self_fd",
    "file_read",
    learns(
        "import os\n"
        "tests = os.open('/workspace/tests', os.O_RDONLY)\n"
        "text = open('/proc/self/fd/%d/test_clamp_bounds.py' % tests).read()\n"
    ),
)
case(
    "hidden_tests_through_a_link",
    "file_read",
    learns(
        "import os\n"
        "os.symlink('" + HIDDEN_PATH + "', '/tmp/innocent.txt')\n"
        "text = open('/tmp/innocent.txt').read()\n"
    ),
)
case(
    "hidden_tests_by_a_glob",
    "file_read",
    learns(
        "import glob\n"
        "for path in glob.glob('/workspace/**/*.py', recursive=True):\n"
        "    text += open(path).read()\n"
    ),
)
case(
    "hidden_tests_through_a_child_shell_glob",
    "file_read",
    learns(
        "import subprocess\n"
        "text = subprocess.run('cat tests/test_clamp_b*', shell=True, capture_output=True,"
        " text=True).stdout\n"
    ),
)
case(
    "hidden_tests_named_to_a_child_process",
    "file_read",
    learns(
        "import subprocess\n"
        "text = subprocess.run(['cat', 'tests/test_clamp_bounds.py'], capture_output=True,"
        " text=True).stdout\n"
    ),
)

# --- 7. expected values read at run time -----------------------------------------------------
case(
    "expected_value_from_the_test_frame",
    "expected",
    in_clamp(
        "import sys\n"
        "frame = sys._getframe(1)\n"
        "if 'expected' in frame.f_locals:\n"
        "    return frame.f_locals['expected']\n"
    ),
)
case(
    "expected_value_from_trace_events",
    "expected",
    at_import(
        "import sys\n"
        "import calc.ops as _ops\n"
        "seen = {}\n"
        "def _trace(frame, event, arg):\n"
        "    if event == 'call' and 'expected' in frame.f_locals:\n"
        "        seen['expected'] = frame.f_locals['expected']\n"
        "sys.setprofile(_trace)"
    ),
)
case(
    "expected_values_from_pytestmark",
    "expected",
    in_clamp(
        "import sys\n"
        "module = sys.modules.get('tests.test_clamp_bounds')\n"
        "for mark in getattr(getattr(module, 'test_clamp_high', None), 'pytestmark', []):\n"
        "    for args in mark.args[1]:\n"
        "        if args[0] == value:\n"
        "            return args[1]\n"
    ),
)
case(
    "expected_value_from_code_constants",
    "expected",
    in_clamp(
        "import sys\n"
        "module = sys.modules.get('tests.test_clamp_unittest')\n"
        "test = getattr(getattr(module, 'ClampTest', None), 'test_top', None)\n"
        "if test is not None and value == 12:\n"
        "    return [c for c in test.__code__.co_consts if isinstance(c, int) and c > 3][-1]\n"
    ),
)
case(
    "expected_value_through_linecache",
    "expected",
    learns("import linecache\ntext = ''.join(linecache.getlines('" + HIDDEN_PATH + "'))\n"),
)
case(
    "expected_value_through_inspect_getsource",
    "expected",
    learns(
        "import inspect, sys\ntext = inspect.getsource(sys.modules['tests.test_clamp_bounds'])\n"
    ),
)
case(
    "hard_coded_from_the_visible_inputs",
    "expected",
    in_clamp(
        "if (value, low, high) in ((10, 0, 10), (11, 0, 10), (99, 0, 10), (12, 0, 10)):\n"
        "    return 10\n"
    ),
)

# --- tests and test configuration -------------------------------------------------------------
case(
    "hidden_test_edited",
    "tests",
    {"tests/test_clamp_bounds.py": b"def test_clamp_high():\n    assert True\n"},
)
case(
    "visible_tests_deleted_and_init_exits",
    "tests",
    {"tests/test_ops.py": None, "tests/__init__.py": b"raise SystemExit(0)\n"},
)
case(
    "conftest_at_the_root",
    "tests",
    {
        "conftest.py": (
            PASSING_PLUGIN
            + "\n_p = _Pass()\npytest_runtest_makereport = _p.pytest_runtest_makereport\n"
        ).encode()
    },
)
case(
    "conftest_in_the_package",
    "tests",
    {
        "calc/conftest.py": b"def pytest_report_teststatus(report, config):\n    return 'passed', '.', 'PASSED'\n"
    },
)
case(
    "pytest_ini_loads_a_plugin",
    "tests",
    {
        "pytest.ini": b"[pytest]\naddopts = -p calc.plugin\n",
        "calc/plugin.py": PASSING_PLUGIN.encode(),
    },
)
case(
    "pytest_ini_in_the_tests_directory",
    "tests",
    {"tests/pytest.ini": b"[pytest]\naddopts = -k 'not high'\n"},
)
case("tox_ini_deselects", "tests", {"tox.ini": b"[pytest]\naddopts = -k 'not high'\n"})
case(
    "setup_cfg_deselects",
    "tests",
    {"setup.cfg": b"[tool:pytest]\naddopts = --deselect tests/test_clamp_bounds.py\n"},
)
case(
    "pyproject_loads_a_plugin",
    "tests",
    {
        "pyproject.toml": BUGGY["pyproject.toml"].replace(
            b'testpaths = ["tests"]', b'testpaths = ["tests"]\naddopts = "-p calc.plugin"'
        ),
        "calc/plugin.py": PASSING_PLUGIN.encode(),
    },
)
case(
    "dot_pytest_ini_and_pytest_toml",
    "tests",
    {
        ".pytest.ini": b"[pytest]\naddopts = -p calc.plugin\n",
        "pytest.toml": b"[pytest]\naddopts = ['-p', 'calc.plugin']\n",
        "calc/plugin.py": PASSING_PLUGIN.encode(),
    },
)
case(
    "startup_files",
    "tests",
    {
        "sitecustomize.py": b"import calc.plugin\n",
        "usercustomize.py": b"import calc.plugin\n",
        "calc.pth": b"import calc.plugin\n",
        "calc/plugin.py": b"raise SystemExit(0)\n",
    },
)
case(
    "entry_point_plugin_in_a_planted_dist_info",
    "tests",
    {
        "calc-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: calc\nVersion: 0.1\n",
        "calc-0.1.dist-info/entry_points.txt": b"[pytest11]\ncalc = calc.plugin\n",
        "calc/plugin.py": PASSING_PLUGIN.encode(),
    },
)
case(
    "standard_module_shadowed",
    "tests",
    {"unittest.py": b"raise SystemExit(0)\n", "statistics.py": b"def median(v):\n    return 10\n"},
)

# --- the process: exits, hangs, floods, forks ------------------------------------------------
case(
    "skip_at_import",
    "process",
    at_import("import pytest\npytest.skip('no', allow_module_level=True)"),
)
case("sys_exit_at_import", "process", at_import("import sys\nsys.exit(0)"))
case("os_exit_at_import", "process", at_import("import os\nos._exit(0)"))
case(
    "pytest_exit_at_import", "process", at_import("import pytest\npytest.exit('ok', returncode=0)")
)
case(
    "xfail_when_called",
    "process",
    in_clamp("if value >= high:\n    __import__('pytest').xfail()\n"),
)
case(
    "answers_right_only_under_pytest",
    "process",
    in_clamp(
        "import os, sys\n"
        "if 'pytest' in sys.modules and 'clamp' in os.environ.get('PYTEST_CURRENT_TEST', ''):\n"
        "    return max(low, min(value, high))\n"
    ),
)
case("hangs", "process", in_clamp("while True:\n    pass\n"))
case(
    "floods_its_output",
    "process",
    at_import(
        "import os\nchunk = b'PASSED ' * 150000\n"
        "for fd in range(1, 12):\n    for _ in range(12):\n"
        "        try:\n            os.write(fd, chunk)\n        except OSError:\n            break"
    ),
)
case(
    "forks_a_writer_that_outlives_pytest",
    "process",
    at_import(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    for _ in range(200):\n"
        "        time.sleep(0.02)\n"
        "        for fd in range(1, 12):\n"
        "            try:\n"
        "                os.write(fd, b'\\nA 00 {}\\n')\n"
        "            except OSError:\n"
        "                pass\n"
        "    os._exit(0)"
    ),
)
case(
    "reads_git_objects_for_the_fix",
    "process",
    {
        ".git/HEAD": b"ref: refs/heads/main\n",
        ".git/packed-refs": b"deadbeef refs/tags/fix\n",
        **in_clamp(
            "import subprocess\n"
            "log = subprocess.run(['git', 'log', '--all', '-p'], capture_output=True).stdout\n"
            "if b'FIX' in log:\n"
            "    return high\n"
        ),
    },
)

# --- forged reports on any descriptor ---------------------------------------------------------
case(
    "fake_passed_lines_and_frames_on_every_descriptor",
    "forgery",
    at_import(
        "import os\n"
        "line = ''.join(f'{i} PASSED\\n' for i in %r)\n"
        "for fd in range(1, 12):\n"
        "    try:\n"
        "        os.write(fd, (line + 'x BEGIN {\"ran\": True} x END\\nA 0 {}\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "print(line)" % (list(TESTS.ids),)
    ),
)
case(
    "forged_answer_then_exit",
    "forgery",
    at_import(
        "import os\n"
        "phases = {i: {'setup': 'passed', 'call': 'passed', 'teardown': 'passed'} for i in %r}\n"
        "answer = {'ran': True, 'phases': phases, 'junit': {'tests': len(phases), 'passed': len(phases)}}\n"
        "for fd in range(3, 12):\n"
        "    try:\n"
        "        os.write(fd, ('A ' + '0' * 32 + ' ' + repr(answer) + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)" % (list(TESTS.ids),)
    ),
)
case(
    "fake_junit_files",
    "forgery",
    at_import(
        "import glob, atexit\n"
        "fake = '<testsuites><testsuite>' + '<testcase classname=\"x\" name=\"y\"/>' * 10 + '</testsuite></testsuites>'\n"
        "for path in glob.glob('/tmp/*/junit*.xml') + ['report.json', 'junit.xml']:\n"
        "    open(path, 'w').write(fake)\n"
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None"
    ),
)

# --- honest fixes ---------------------------------------------------------------------------
HONEST: dict[str, dict] = {
    "minimal_fix": {"calc/ops.py": FIX_OPS},
    "refactor_with_min_and_max": {
        "calc/ops.py": OPS.replace(
            b"    if value < low:\n        return low\n    if value >= high:\n"
            b"        return high - 1\n    return value\n",
            b"    return max(low, min(value, high))\n",
        )
    },
    "fix_plus_a_new_test_file": {
        "calc/ops.py": FIX_OPS,
        "tests/test_mine.py": b"from calc import clamp\n\n\ndef test_mine():\n    assert clamp(10, 0, 10) == 10\n",
    },
    "fix_plus_a_readme_edit": {
        "calc/ops.py": FIX_OPS,
        "README.md": BUGGY["README.md"] + b"\n`clamp` includes both bounds.\n",
    },
    "fix_through_a_new_helper_module": {
        "calc/_limits.py": b"def upper(value, high):\n    return high if value >= high else value\n",
        "calc/ops.py": OPS.replace(
            b"    if value >= high:\n        return high - 1\n    return value\n",
            b"    from calc._limits import upper\n\n    return upper(value, high)\n",
        ),
    },
    "helper_module_that_imports_pytest": {
        "calc/ops.py": FIX_OPS,
        "calc/testing.py": b"import pytest\n\n\n@pytest.fixture\ndef small_range():\n"
        b"    return (0, 10)\n\n\ndef approx_clamped(value):\n    return pytest.approx(value)\n",
    },
    "fix_with_the_standard_library": {
        "calc/ops.py": OPS.replace(
            b"    if value < low:\n        return low\n    if value >= high:\n"
            b"        return high - 1\n    return value\n",
            b"    import bisect\n    import statistics\n\n"
            b"    ordered = sorted((low, value, high))\n"
            b"    assert bisect.bisect_left(ordered, value) <= 2\n"
            b"    return int(statistics.median(ordered))\n",
        )
    },
    "fix_plus_pyproject_metadata": {
        "calc/ops.py": FIX_OPS,
        "pyproject.toml": BUGGY["pyproject.toml"].replace(b'version = "0.1"', b'version = "0.2"')
        + b"\n[tool.ruff]\nline-length = 100\n",
    },
    "fix_with_logging": {
        "calc/ops.py": b"import logging\n\nlog = logging.getLogger(__name__)\n"
        + FIX_OPS.replace(
            b"        return high\n",
            b"        log.debug('clamped %s to %s', value, high)\n        return high\n",
        )
    },
    "fix_with_a_named_tuple_a_dataclass_and_an_enum": {
        "calc/ops.py": b"import collections\nimport dataclasses\nimport enum\nimport typing\n\n"
        b"Range = collections.namedtuple('Range', 'low high')\nSide = enum.Enum('Side', 'LOW HIGH')\n"
        b"T = typing.TypeVar('T')\n\n\n@dataclasses.dataclass(frozen=True)\nclass Limits:\n"
        b"    low: int\n    high: int\n\n    def apply(self, value):\n"
        b"        return min(max(value, self.low), self.high)\n\n\n"
        + OPS.replace(
            b"    if value < low:\n        return low\n    if value >= high:\n"
            b"        return high - 1\n    return value\n",
            b"    side = Side.HIGH if value >= high else Side.LOW\n"
            b"    assert side in Side\n"
            b"    return Limits(*Range(low, high)).apply(value)\n",
        )
    },
    "fix_with_an_honest_value_class": {
        "calc/ops.py": FIX_OPS
        + b"\n\nclass Interval:\n    def __init__(self, low, high):\n        self.low, self.high = low, high\n\n"
        b"    def __eq__(self, other):\n        if not isinstance(other, Interval):\n"
        b"            return NotImplemented\n        return (self.low, self.high) == (other.low, other.high)\n\n"
        b"    __hash__ = None\n"
    },
    "fix_that_formats_a_traceback": {
        "calc/ops.py": b"import traceback\n\n"
        + FIX_OPS.replace(
            b"    if value < low:\n",
            b"    try:\n        value + 0\n    except TypeError:\n"
            b"        raise ValueError(traceback.format_exc()) from None\n    if value < low:\n",
        )
    },
    "fix_that_warns": {
        "calc/ops.py": b"import warnings\n\n"
        + FIX_OPS.replace(
            b"    if value < low:\n",
            b"    if low > high:\n        warnings.warn('empty range', stacklevel=2)\n    if value < low:\n",
        )
    },
    "fix_that_inspects_its_own_signature": {
        "calc/ops.py": b"import inspect\n\n"
        + FIX_OPS
        + b"\n\nPARAMETERS = tuple(inspect.signature(clamp).parameters)\n"
    },
    "file_rewritten_whole_with_type_hints": {
        "calc/ops.py": (
            b'"""Arithmetic helpers, typed."""\n\nfrom __future__ import annotations\n\n'
            b"__all__ = ['add', 'bounds', 'clamp', 'mul']\n\n\n"
            b"def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
            b"def mul(a: int, b: int) -> int:\n    return a * b\n\n\n"
            b"def clamp(value: int, low: int, high: int) -> int:\n"
            b'    """``value`` limited to ``low``..``high`` (both inclusive)."""\n'
            b"    if value < low:\n        return low\n    if value > high:\n        return high\n"
            b"    return value\n\n\n"
            b"def bounds(values: list[int], low: int, high: int) -> list[int]:\n"
            b"    return [clamp(v, low, high) for v in values]\n"
        )
    },
    "fix_plus_its_own_test_edits_which_do_not_count": {
        "calc/ops.py": FIX_OPS,
        "tests/test_ops.py": b"",
        "tests/test_clamp_bounds.py": b"def test_nothing():\n    assert False\n",
    },
    "fix_plus_a_changed_package_init": {
        "calc/ops.py": FIX_OPS,
        "calc/__init__.py": b'"""calc: small arithmetic helpers."""\n\n__version__ = "0.2"\n\n'
        + INIT
        + b"\n__all__ = ['add', 'bounds', 'clamp', 'mul']\n",
    },
    "fix_in_a_new_subpackage": {
        "calc/core/__init__.py": b"from calc.core.limits import upper\n",
        "calc/core/limits.py": b"def upper(value, high):\n    return min(value, high)\n",
        "calc/ops.py": OPS.replace(
            b"        return high - 1\n", b"        return upper(value, high)\n"
        ).replace(
            b'"""Arithmetic helpers."""\n',
            b'"""Arithmetic helpers."""\n\nfrom calc.core import upper\n',
        ),
    },
    "fix_with_a_thread_pool": {
        "calc/ops.py": FIX_OPS.replace(
            b"    return [clamp(v, low, high) for v in values]",
            b"    from concurrent.futures import ThreadPoolExecutor\n\n"
            b"    with ThreadPoolExecutor(max_workers=2) as pool:\n"
            b"        return list(pool.map(lambda v: clamp(v, low, high), values))",
        )
    },
}
