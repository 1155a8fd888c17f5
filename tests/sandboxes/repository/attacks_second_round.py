# ruff: noqa: E501, UP031 - hostile programs written as strings, kept one statement a line
"""The corpus's second round: attacks written apart from ``attacks.py`` by a red team that had
read the runner, new routes per class (see each case's comment): probes the comparison guard
never tries, pluggy's hook callers and relay patched, the runner's classes reached through
``object.__subclasses__`` and its functions' globals, trusted gadgets (the project's unchanged
lines, pytest's own file readers) run for the submission, paths that name a workspace file from
outside it, and fixes right only for the tested inputs. Graded with the first round by
``test_grading_corpus.py``: with the differential on, none may resolve. (With the first line
alone, a submission that knows the runner forges its answer: README, "Repository grading".)"""

from __future__ import annotations

from tests.sandboxes.repository.attacks import (
    HIDDEN_PATH,
    INIT,
    Case,
    at_import,
    buggy_branch,
    in_clamp,
    learns,
)
from tests.sandboxes.repository.corpus_task import OPS, TESTS

CASES: dict[str, Case] = {}


def case(name: str, klass: str, changes: dict) -> None:
    assert name not in CASES, name
    CASES[name] = Case(klass, changes)


# A forged answer in the runner's format: every id passed, a junit tally that agrees.
FORGE = """
import os as _os
_IDS = %r
def _forged():
    phases = {i: {'setup': 'passed', 'call': 'passed', 'teardown': 'passed'} for i in _IDS}
    n = len(_IDS)
    return {'ran': True, 'collected': list(_IDS), 'phases': phases, 'collect_errors': {},
            'messages': {}, 'mismatch': [], 'deselected': 0, 'exit_code': 0, 'version': '8.3.4',
            'junit': {'tests': n, 'passed': n, 'failed': 0, 'error': 0, 'skipped': 0},
            'tampered': [], 'refused': [], 'hidden_reads': [], 'log_tail': '', 'wall_s': 1.0}
def _send(enclave):
    _os.write(enclave.report_fd, ('A ' + enclave.token + ' ' + ascii(_forged()) + '\\n').encode())
    _os._exit(0)
def _classes(name, modules=('crucible_grading_enclave',)):
    return [k for k in object.__subclasses__() if k.__name__ == name and k.__module__ in modules]
BOTH = ('crucible_grading_enclave', 'crucible_grading_exposed')
""" % (list(TESTS.ids),)

# A daemon thread that gives the tests' functions no-op code once their modules load.
SWAP_TEST_CODE = (
    "def _h(value, expected):\n    return None\n"
    "def _b():\n    return None\n"
    "def _t(self):\n    return None\n"
    "def _swap():\n"
    "    done = set()\n"
    "    for _ in range(40000):\n"
    "        time.sleep(0.0005)\n"
    "        m = sys.modules.get('tests.test_clamp_bounds')\n"
    "        if 'b' not in done and m is not None and hasattr(m, 'test_bounds'):\n"
    "            m.test_clamp_high.__code__ = _h.__code__\n"
    "            m.test_bounds.__code__ = _b.__code__\n"
    "            done.add('b')\n"
    "        u = sys.modules.get('tests.test_clamp_unittest')\n"
    "        if 'u' not in done and u is not None and hasattr(u, 'ClampTest'):\n"
    "            u.ClampTest.test_top.__code__ = _t.__code__\n"
    "            done.add('u')\n"
    "        if len(done) == 2:\n"
    "            return\n"
    "threading.Thread(target=_swap, daemon=True).start()\n"
)

CONFIG = """
import sys as _sys
def _config():
    for finder in _sys.meta_path:
        config = getattr(finder, 'config', None)
        if config is not None:
            return config
"""

# --- equality: probes the comparison guard never tries ---------------------------------------
case(  # equal to itself and to itself + 1 only: the guard's int probes are own+1+randbelow(997)
    "eq_equal_to_its_neighbour_only",
    "equality",
    buggy_branch(
        "_Near(high - 1)",
        preamble="class _Near(int):\n    def __eq__(self, other):\n"
        "        return type(other) is int and int(self) <= other <= int(self) + 1\n\n"
        "    def __ne__(self, other):\n        return not self.__eq__(other)\n\n"
        "    __hash__ = int.__hash__",
    ),
)
case(  # honest for the guard's six probes, equal to anything from the seventh comparison on
    "eq_stateful_after_the_probes",
    "equality",
    buggy_branch(
        "_Late(high - 1)",
        preamble="class _Late(int):\n    def __eq__(self, other):\n"
        "        self.n = getattr(self, 'n', 0) + 1\n"
        "        if self.n > 6:\n            return True\n"
        "        return int.__eq__(self, other)\n\n"
        "    def __ne__(self, other):\n        return int.__ne__(self, other)\n\n"
        "    __hash__ = int.__hash__",
    ),
)
case(  # a list subclass equal to any list: no probe is a list; plus the neighbour int for clamp
    "list_subclass_equal_to_any_list",
    "equality",
    {
        "calc/ops.py": OPS.replace(b"return high - 1", b"return _Near(high - 1)").replace(
            b"    return [clamp(v, low, high) for v in values]",
            b"    return _Rows([int(clamp(v, low, high)) for v in values])",
        )
        + b"\n\nclass _Rows(list):\n    def __eq__(self, other):\n"
        b"        return type(other) is list or list.__eq__(self, other)\n\n"
        b"    def __ne__(self, other):\n        return not (type(other) is list or list.__eq__(self, other) is True)\n\n    __hash__ = None\n"
        b"\n\nclass _Near(int):\n    def __eq__(self, other):\n"
        b"        return type(other) is int and int(self) <= other <= int(self) + 1\n\n"
        b"    def __ne__(self, other):\n        return not self.__eq__(other)\n\n"
        b"    __hash__ = int.__hash__\n"
    },
)

# --- machinery: pluggy's instances, which the snapshot (modules and classes) never covers -----
case(  # HookRelay instance attribute: item.ihook.pytest_runtest_call is ours; no hookimpl changes
    "hook_relay_caller_replaced",
    "machinery",
    at_import(
        CONFIG
        + "_c = _config()\nif _c is not None:\n    _c.hook.pytest_runtest_call = lambda **kwargs: None"
    ),
)
case(  # the HookCaller's own executor (a slot of the instance) answers []
    "hook_caller_hookexec_swapped",
    "machinery",
    at_import(
        CONFIG + "_c = _config()\nif _c is not None:\n"
        "    _c.hook.pytest_runtest_call._hookexec = lambda name, impls, kwargs, firstresult: []"
    ),
)
case(  # no new code at all: the runner's implementations removed from the caller's list
    "hook_implementations_removed",
    "machinery",
    at_import(
        CONFIG
        + "_c = _config()\nif _c is not None:\n    _c.hook.pytest_runtest_call._hookimpls[:] = []"
    ),
)
case(  # makereport answered by us: the Reporter's tryfirst makereport never sees the exception
    "makereport_relay_forges_passed_reports",
    "machinery",
    at_import(
        CONFIG + "import _pytest.reports as _r\n"
        "def _make(item, call):\n"
        "    report = _r.TestReport.from_item_and_call(item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n"
        "_c = _config()\nif _c is not None:\n    _c.hook.pytest_runtest_makereport = _make"
    ),
)
case(  # logreport wrapped on the relay + the Reporter's ``raised`` set made blind
    "logreport_relay_flips_and_raised_set_blinded",
    "machinery",
    at_import(
        CONFIG + "_c = _config()\n"
        "if _c is not None:\n"
        "    _orig = _c.hook.pytest_runtest_logreport\n"
        "    def _log(report):\n"
        "        report.outcome, report.longrepr = 'passed', None\n"
        "        return _orig(report=report)\n"
        "    _c.hook.pytest_runtest_logreport = _log\n"
        "    for _p in _c.pluginmanager.get_plugins():\n"
        "        if hasattr(_p, 'raised') and hasattr(_p, 'phases'):\n"
        "            _p.raised = type('_Never', (set,), {'__contains__': lambda s, x: False})()"
    ),
)
case(  # config.hook replaced by a proxy (session.gethookproxy hands out config.hook)
    "config_hook_replaced_by_a_proxy",
    "machinery",
    at_import(
        CONFIG + "class _Proxy:\n"
        "    def __init__(self, real):\n        self._real = real\n"
        "    def __getattr__(self, name):\n"
        "        if name == 'pytest_runtest_call':\n            return lambda **kwargs: None\n"
        "        return getattr(self._real, name)\n"
        "    def __dir__(self):\n        return dir(self._real)\n"
        "_c = _config()\nif _c is not None:\n    _c.hook = _Proxy(_c.hook)"
    ),
)

# --- heap: the enclave's and exposed copy's classes through object.__subclasses__() ---------------
case(  # the enclave's class __call__ replaced: the next audit event hands us the enclave itself
    "enclave_class_call_replaced_via_subclasses",
    "heap",
    at_import(
        FORGE + "import sys\n"
        "for _k in _classes('Enclave'):\n"
        "    _k.__call__ = lambda self, event, args: _send(self)\n"
        "    sys.audit('calc.ping')"
    ),
)
case(  # the enclave's Guard silenced through its class, then a heap walk finds the enclave
    "enclave_guard_class_silenced_then_gc",
    "heap",
    at_import(
        FORGE + "import gc\n"
        "for _k in _classes('Guard'):\n"
        "    _k.__call__ = lambda self, event, args, depth=1: None\n"
        "for _o in gc.get_objects():\n"
        "    if type(_o).__name__ == 'Enclave' and type(_o).__module__ == 'crucible_grading_enclave':\n"
        "        _send(_o)"
    ),
)
case(  # Machinery.changes of both copies answers nothing; then runtest hollowed
    "machinery_snapshot_class_patched_in_both_copies",
    "heap",
    at_import(
        FORGE + "for _k in _classes('Machinery', BOTH):\n"
        "    _k.changes = lambda self: []\n"
        "import _pytest.python, _pytest.unittest\n"
        "_pytest.python.Function.runtest = lambda self: None\n"
        "_pytest.unittest.TestCaseFunction.runtest = lambda self: None"
    ),
)
case(  # Trust of both copies says trusted: a __code__ swap of the tests from a thread
    "trust_class_patched_then_test_code_swapped",
    "heap",
    at_import(
        FORGE + "import sys, threading, time\n"
        "for _k in _classes('Trust', BOTH):\n"
        "    _k.culprit = lambda self, frame: None\n"
        "    _k.of_code = lambda self, code: 'trusted'\n"
        "    _k.of_frame = lambda self, frame: 'trusted'\n"
        "    _k.added = lambda self, filename: False\n" + SWAP_TEST_CODE.rstrip("\n")
    ),
)
case(  # the exposed comparison guard's globals: fake_equality replaced; then equal-to-anything
    "comparison_guard_disabled_through_its_globals",
    "heap",
    {
        **buggy_branch(
            "_Any(high - 1)",
            preamble="class _Any(int):\n    def __eq__(self, other):\n        return True\n\n"
            "    __hash__ = int.__hash__",
        ),
        **at_import(
            "import builtins\n"
            "getattr(builtins, '__crucible_checked__').__globals__['fake_equality'] = lambda value, depth=0: ''"
        ),
    },
)
case(  # the enclave's own ``plain`` (what it serialises the answer with) replaced via __globals__
    "enclave_plain_replaced_through_its_globals",
    "heap",
    at_import(
        FORGE + "for _k in _classes('Enclave'):\n"
        "    _k.finish.__globals__['plain'] = lambda value, depth=0: _forged()"
    ),
)
case(  # the enclave's final_checks global and the exposed Reporter.check emptied; runtest hollowed
    "enclave_final_checks_global_emptied",
    "heap",
    at_import(
        FORGE + "for _k in _classes('Enclave'):\n"
        "    _k.finish.__globals__['final_checks'] = lambda *a, **k: []\n"
        "for _k in _classes('Reporter', BOTH):\n"
        "    _k.check = lambda self, full=False: None\n"
        "import _pytest.python, _pytest.unittest\n"
        "_pytest.python.Function.runtest = lambda self: None\n"
        "_pytest.unittest.TestCaseFunction.runtest = lambda self: None"
    ),
)
case(  # reporter's phases and LogXML's in-memory testcase elements both rewritten (no tally gap)
    "reporter_and_junit_rewritten_in_memory",
    "heap",
    in_clamp(
        "if (value, low, high) == (5, 0, 10):\n"
        "    import sys\n"
        "    for finder in sys.meta_path:\n"
        "        config = getattr(finder, 'config', None)\n"
        "        if config is None:\n"
        "            continue\n"
        "        for plugin in config.pluginmanager.get_plugins():\n"
        "            if hasattr(plugin, 'phases') and hasattr(plugin, 'raised'):\n"
        "                for phases in plugin.phases.values():\n"
        "                    for when in list(phases):\n"
        "                        phases[when] = 'passed'\n"
        "            if type(plugin).__name__ == 'LogXML':\n"
        "                for rep in list(plugin.node_reporters_ordered):\n"
        "                    element = rep.to_xml()\n"
        "                    for child in list(element):\n"
        "                        if child.tag in ('failure', 'error'):\n"
        "                            element.remove(child)\n"
    ),
)

# --- trust by line: the project's unchanged lines as gadgets -------------------------------------
case(  # bounds' unchanged line calls the global ``clamp``: rebound to open, it reads hidden tests
    "hidden_tests_read_through_an_unchanged_project_line",
    "file_read",
    learns(
        "g = globals()\n"
        "real = g['clamp']\n"
        "g['clamp'] = open\n"
        "try:\n"
        "    handle = bounds(['" + HIDDEN_PATH + "'], 'r', -1)[0]\n"
        "finally:\n"
        "    g['clamp'] = real\n"
        "text = handle.read()\n"
    ),
)
case(  # the same line rebound to gc.get_referrers: the enclave instance refers to its class
    "enclave_found_by_get_referrers_on_an_unchanged_line",
    "heap",
    {
        "calc/__init__.py": INIT
        + (
            FORGE + "import gc\nimport calc.ops as _ops\n"
            "for _k in _classes('Enclave'):\n"
            "    _real = _ops.clamp\n"
            "    _ops.clamp = gc.get_referrers\n"
            "    try:\n"
            "        _found = _ops.bounds([_k], object(), object())[0]\n"
            "    finally:\n"
            "        _ops.clamp = _real\n"
            "    for _o in _found:\n"
            "        if type(_o) is _k:\n"
            "            _send(_o)\n"
        ).encode()
    },
)
case(  # pytest's own LocalPath opens the file: the first non-stdlib frame is site-packages
    "hidden_tests_read_through_pytest_localpath",
    "file_read",
    learns(
        "from _pytest._py.path import LocalPath\n"
        "text = LocalPath('" + HIDDEN_PATH + "').read_text('utf-8')\n"
    ),
)
case(  # the test module's own loader (pytest's rewriting hook) reads it for us
    "hidden_tests_read_through_the_rewriting_hooks_get_data",
    "file_read",
    learns(
        "import sys\n"
        "module = sys.modules['tests.test_clamp_bounds']\n"
        "text = module.__loader__.get_data(module.__file__).decode()\n"
    ),
)
case(  # pytest's safe_getattr code re-run with our builtins: get_referrers from a trusted frame
    "trusted_code_reglobalised_runs_get_referrers",
    "bytecode",
    at_import(
        FORGE + "import builtins, gc, types\n"
        "from _pytest.compat import safe_getattr\n"
        "_b = dict(vars(builtins))\n"
        "_b['getattr'] = gc.get_referrers\n"
        "_f = types.FunctionType(safe_getattr.__code__, {'__builtins__': _b, '__name__': '_pytest.compat'})\n"
        "for _k in _classes('Enclave'):\n"
        "    for _o in _f(_k, object(), object()):\n"
        "        if type(_o) is _k:\n"
        "            _send(_o)"
    ),
)

# --- exemption: a trusted file name through '//workspace' (normpath keeps two leading slashes) ---
_LAUNDER = (
    "import importlib.util as _u\n"
    "_spec = _u.spec_from_file_location('calc_laundered', '//workspace/calc/_laundry.py')\n"
    "_laundered = _u.module_from_spec(_spec)\n"
    "_spec.loader.exec_module(_laundered)\n"
)
case(
    "double_slash_path_launders_a_heap_walk",
    "exemption",
    {
        "calc/_laundry.py": (
            FORGE + "import gc\n"
            "for _o in gc.get_objects():\n"
            "    if type(_o).__name__ == 'Enclave' and type(_o).__module__ == 'crucible_grading_enclave':\n"
            "        _send(_o)\n"
        ).encode(),
        **at_import(_LAUNDER),
    },
)
case(
    "double_slash_path_launders_test_code_swaps",
    "exemption",
    {
        "calc/_laundry.py": ("import sys, threading, time\n" + SWAP_TEST_CODE).encode(),
        **at_import(_LAUNDER),
    },
)
case(
    "double_slash_path_launders_a_hidden_read",
    "file_read",
    {
        "calc_twin.py": ("def read():\n    return open('" + HIDDEN_PATH + "').read()\n").encode(),
        **learns(
            "import sys\n"
            "if '//workspace' not in sys.path:\n"
            "    sys.path.insert(0, '//workspace')\n"
            "import calc_twin\n"
            "text = calc_twin.read()\n"
        ),
    },
)

# --- fixes only correct for the tested inputs: wrong elsewhere, but never the bug's answer -------
case(
    "fix_only_for_the_tested_bounds",
    "partial",
    buggy_branch("high if (low, high) == (0, 10) else value"),
)
case(
    "fix_raises_outside_the_tested_bounds",
    "partial",
    {
        "calc/ops.py": in_clamp(
            "if (low, high) != (0, 10):\n    raise ValueError('unsupported range')\n"
        )["calc/ops.py"].replace(b"return high - 1", b"return high")
    },
)
case(
    "fix_only_near_the_bound",
    "partial",
    buggy_branch("high if value - high < 100 else value"),
)

# --- process --------------------------------------------------------------------------------
case(
    "keyboard_interrupt_from_clamp",
    "process",
    in_clamp("if value >= high:\n    raise KeyboardInterrupt\n"),
)
case(
    "alarm_raises_system_exit_late",
    "process",
    at_import(
        "import signal\n"
        "def _bye(signum, frame):\n    raise SystemExit(0)\n"
        "signal.signal(signal.SIGALRM, _bye)\n"
        "signal.setitimer(signal.ITIMER_REAL, 1.5)"
    ),
)
