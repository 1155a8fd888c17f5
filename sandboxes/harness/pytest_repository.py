"""The pytest process of a repository grading, inside a fresh sandbox session.

Started by the supervisor (``pytest_supervisor.py``) as ``python3 -I -B``: no ``PYTHONPATH``,
user site or script directory on ``sys.path`` (no ``sitecustomize``, ``usercustomize`` or
``.pth`` of the workspace loads), no bytecode written. No bytecode of the workspace is ever
read: the host strips ``__pycache__`` and ``*.pyc`` from the graded tree, the loader of
sourceless ``.pyc`` files is taken off the import path, pytest's cache of rewritten test
modules is never read, and the audit hook refuses to unmarshal anything but the standard
library's and the environment's cached bytecode. Its stdin carries a JSON configuration line
and the runner's source (``grading_trust.py``, ``grading_guard.py``, ``grading_checks.py`` and
this file, in that order); descriptor 3 is the *report pipe* to the supervisor. Standard
library and pytest.

Before any workspace code can run (the *first line* of the grading; ``guards`` false in the
configuration switches it off, for tests of the second line):

1. **No secret for the code under test to find.** The nonce that frames the answer lives in
   the supervisor, another non-dumpable process. This process makes itself non-dumpable too
   (no other process of the session can read its memory or descriptors), writes a hello line
   with a fresh token on the report pipe, and closes that pipe in every process it forks.
2. **The machinery, snapshotted.** pytest, pluggy, every default plugin, unittest and what
   the grading needs are imported; the test machinery's modules (``_pytest.*``, ``pytest``,
   ``pluggy.*``, ``unittest.*``, ``builtins``, importlib's bootstrap) are snapshotted: every
   global's identity, every function's code, defaults and closure, every class's attributes
   and metaclass, and ``sys.modules``' entry of each. :class:`Machinery` compares the live
   state with it after collection, after every test and at the end, both ways (a name added
   counts), with no exemption a submission can claim.
3. **An audit hook that refuses** (PEP 578: it cannot be removed) what honest code never
   needs, whenever the code asking is *untrusted*: a workspace file the submission changed
   or added (the host names the unchanged ones), code made at run time, ``/tmp``, or a thread
   running only the standard library (see :class:`Trust`). Refused: heap walks (``gc``
   ``get_objects``/``get_referrers``/``get_referents``), other threads' frames, trace and
   profile hooks, frames handed to the code under test (``sys._getframe`` and traceback,
   generator and coroutine frames, unless a standard-library function consumes them for
   it: ``logging``, ``traceback``'s summaries...), a test function's ``__code__``, any
   ``__code__`` assignment, code objects built by hand or unmarshalled (other than a genuine
   import's ``.pyc`` of the standard library), source compiled under a name that is not its
   own (a test file's, the standard library's, pytest's), ``ctypes`` and
   ``_testcapi``-like modules, ``/proc/<pid>/mem``, writes to test files, and any read of a
   hidden test file. A test file is compiled only from its exact bytes (SHA-256 from the
   host) or by pytest's own assertion rewriter.
4. **Comparisons that cannot be faked.** Every ``assert`` comparison in the task's test files
   and every ``unittest`` comparison method first checks each operand: a value whose class
   takes ``==``, ``!=`` or ``in`` from untrusted code and compares equal to an unrelated
   object (a fresh sentinel, a random string or number) fails the test
   (:func:`fake_equality`).

**Two namespaces.** Everything pytest, the tests or ``builtins`` can reach (the reporter
plugin, the comparison guard, the unittest wrappers) comes from a second copy of this program
(:func:`main` runs its source again in a namespace of its own), so that reaching one of them
(``__globals__``, attributes) reaches nothing the audit hook, the trust rules or the final
checks use: those live only in :func:`main`'s frame and the first copy.

pytest then runs with the task version's configuration only (``-c``, ``--rootdir``), no cache
provider, and a reporter plugin (:class:`Reporter`): it keeps the selected ids, records each
phase's outcome, notes a call that raised but was reported passed, checks every plugin as it
registers and every test's code (and everything it wraps) before the test runs: code from
untrusted files, a test module whose ``pytest`` or ``unittest`` is not the real one, a test
class whose bases come from untrusted code. Its junit XML, in a directory nobody can list, is
a second tally. At the end: one answer line with the token on the report pipe, then
``os._exit``. The supervisor frames it; the host trusts nothing else.
"""

import builtins
import importlib
import importlib.machinery
import json
import os
import secrets
import sys
import tempfile
import xml.etree.ElementTree as ElementTree  # imported before any workspace code can shadow it

try:  # on the host (tests); in the sandbox the parts' source comes first
    from sandboxes.harness.grading_checks import (
        foreign_plugins,
        item_code,
        plugin_origin,
        test_module_imports,
    )
    from sandboxes.harness.grading_guard import Guard
    from sandboxes.harness.grading_trust import (
        LOG_TAIL_BYTES,
        MESSAGE_CHARS,
        REPORT_FD,
        WORKSPACE,
        Machinery,
        Refused,
        Trust,
        _ascii,
        _exit,
        _get_ident,
        _getframe,
        _isinstance,
        _monotonic,
        _nondumpable,
        _report,
        _type,
        first_site_index,
    )
except ImportError:
    pass

RUNNER_NAME = "crucible-grading-runner"


class Reporter:
    """The grading's own pytest plugin (registered as an object, never from the workspace).

    It lives in the exposed copy of the program (see the module): what it judges as the
    tests run (the machinery after each test, each test's code, each plugin as it registers)
    a submission that reaches it could silence, so :func:`main` judges again at the end with
    its own copies.
    """

    def __init__(self, wanted, trust, machinery, guards):
        self.wanted = wanted  # set of node ids, or None: every collected item
        self.trust = trust
        self.machinery = machinery
        self.guards = guards
        self.config = None
        self.items = []
        self.collected = []
        self.phases = {}  # node id -> {when: outcome}
        self.raised = set()  # node ids whose call raised (not a skip or xfail)
        self.collect_errors = {}
        self.messages = {}  # node id -> the first failure's one-line message
        self.mismatch = []
        self.tampered = []
        self.deselected = 0
        self.rewrite_module = sys.modules["_pytest.assertion.rewrite"]

    def note(self, items):
        for item in items:
            if item not in self.tampered and len(self.tampered) < 50:
                self.tampered.append(item)

    def check(self, *, full=False):
        """Compare the machinery with the snapshot; with ``full``, also the test modules'
        imports and every plugin and hook implementation."""
        if not self.guards:
            return
        self.note(self.machinery.changes())
        if full:
            self.note(test_module_imports(self.trust, self.machinery, self.rewrite_module))
            if self.config is not None:
                self.note(foreign_plugins(self.trust, self.config, self))

    def pytest_configure(self, config):
        self.config = config

    def pytest_plugin_registered(self, plugin, manager):
        if self.guards and plugin is not self:
            where = plugin_origin(plugin)
            if self.trust.added(where):
                self.note([f"plugin {_type(plugin).__name__} registered from {where}"])

    def pytest_collection_modifyitems(self, session, config, items):
        if self.wanted is None:
            return
        keep = [item for item in items if item.nodeid in self.wanted]
        dropped = [item for item in items if item.nodeid not in self.wanted]
        if dropped:
            self.deselected += len(dropped)
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors[report.nodeid or "<session>"] = str(report.longrepr)[-2000:]

    def pytest_collection_finish(self, session):
        self.items = list(session.items)
        self.collected = [item.nodeid for item in session.items]
        if self.guards:
            for item in session.items:
                self.note(item_code(self.trust, self.machinery, item))
        self.check(full=True)

    def pytest_runtest_setup(self, item):
        if self.guards:
            self.note(item_code(self.trust, self.machinery, item))

    def pytest_runtest_makereport(self, item, call):
        if call.when == "call" and call.excinfo is not None:
            import _pytest.outcomes  # noqa: PLC0415 - imported already, before the workspace

            skip = (_pytest.outcomes.Skipped, _pytest.outcomes.XFailed)
            if not _isinstance(call.excinfo.value, skip):
                self.raised.add(item.nodeid)

    def pytest_runtest_logreport(self, report):
        phases = self.phases.setdefault(report.nodeid, {})
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        phases[report.when] = outcome
        if report.failed and report.nodeid not in self.messages:
            crash = getattr(report.longrepr, "reprcrash", None)
            lines = str(crash.message if crash is not None else report.longrepr).splitlines()
            self.messages[report.nodeid] = lines[0][:MESSAGE_CHARS] if lines else ""
        if report.when == "call" and report.passed and report.nodeid in self.raised:
            self.mismatch.append(report.nodeid)
        if report.when == "teardown":
            self.check()


# --- the run ------------------------------------------------------------------------------


def plugin_arguments(args):
    """The ``-p`` options of ``args`` (``["-p", "NAME", "-pOTHER"...]``)."""
    found = []
    for index, word in enumerate(args):
        if word == "-p" and index + 1 < len(args):
            found += [word, args[index + 1]]
        elif word.startswith("-p") and word != "-p":
            found.append(word)
    return found


def plugin_names(args):
    """The modules ``-p NAME`` / ``-pNAME`` arguments load (not ``no:`` ones)."""
    names = []
    for index, word in enumerate(args):
        if word.startswith("-p"):
            name = word[2:].lstrip("=") or (args[index + 1] if index + 1 < len(args) else "")
            if name and not name.startswith("no:"):
                names.append(name)
    return names


def junit_tally(path):
    """``{outcome: count}`` of the junit XML pytest wrote, or None when there is none."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    tally = {"tests": 0, "passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for case in root.iter("testcase"):
        tally["tests"] += 1
        tags = {child.tag for child in case}
        if "error" in tags:
            tally["error"] += 1
        elif "failure" in tags:
            tally["failed"] += 1
        elif "skipped" in tags:
            tally["skipped"] += 1
        else:
            tally["passed"] += 1
    return tally


def log_tail(path):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def plain(value, depth=0):
    """``value`` rebuilt from exact builtin types (a ``str`` subclass with its own ``__repr__``
    cannot speak in the answer)."""
    if depth > 8:
        return None
    kind = _type(value)
    if _isinstance(value, bool) or value is None:
        return bool(value) if value is not None else None
    if _isinstance(value, int):
        return int.__int__(value) if kind is not int else value
    if _isinstance(value, float):
        return float.__float__(value)
    if _isinstance(value, str):
        return "".join([value]) if kind is str else str.__str__(value)
    if kind is dict:
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in dict.items(value)}
    if kind in (list, tuple, set):
        return [plain(v, depth + 1) for v in value]
    return None


def _close(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def _no_sourceless_imports():
    """Only source files and extension modules import: a ``.pyc`` beside no ``.py`` never
    loads."""
    machinery = importlib.machinery
    loaders = [
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
    ]
    hook = machinery.FileFinder.path_hook(*loaders)
    sys.path_hooks[:] = [h for h in sys.path_hooks if "FileFinder" not in repr(h)] + [hook]
    sys.path_importer_cache.clear()


def _no_cached_rewrite(*args, **kwargs):
    return None


def final_checks(trust, machinery, reporter):
    """What the enclave finds with its own copies at the end: the machinery, the test modules'
    imports, every plugin and hook, every test's code."""
    found = list(machinery.changes())
    found += test_module_imports(trust, machinery, sys.modules["_pytest.assertion.rewrite"])
    if reporter.config is not None:
        found += foreign_plugins(trust, reporter.config, reporter)
    for item in list(reporter.items):
        found += item_code(trust, machinery, item)
    return found


ARM, FINISH = "crucible.grading.arm", "crucible.grading.finish"


class Enclave:
    """What decides the answer, out of the code under test's reach: the token that signs it, the
    trust rules, the machinery's snapshot, the audit hook's refusals and the final checks.

    It lives in a private copy of this program (see :func:`_enclave_open`), referenced only by
    the interpreter's list of audit hooks, which Python code cannot read: no frame, global,
    attribute or heap walk of the code under test leads to it. :func:`main` talks to it with two
    audit events it alone may raise (their caller must be :func:`main`'s own code): ``ARM``
    before pytest runs, ``FINISH`` at the end, which writes the answer and exits.
    """

    def __init__(self, report_fd, caller, guards):
        self.report_fd, self.caller, self.guards = report_fd, caller, guards
        self.token = secrets.token_hex(16)
        self.guard = None
        self.trust = self.machinery = None
        self.busy = False
        _report(report_fd, "H " + self.token)

    def __call__(self, event, args):
        if event in (ARM, FINISH):
            if self.busy:
                return
            self.busy = True
            try:
                caller = _getframe(1)
            finally:
                self.busy = False
            if caller.f_code is not self.caller:
                raise Refused(f"refused in grading: the event {event} is the runner's")
            if event == ARM:
                self.arm(*args)
            else:
                self.finish(*args)
            return
        if self.guard is not None:
            self.guard(event, args, depth=2)

    def arm(self, config, exposed, out, log):
        """Take the trust rules and the machinery's snapshot (after pytest's own dry run),
        hand the exposed copy what it may know, and start refusing."""
        trusted, unchanged = config["trusted"], config.get("unchanged", ())
        written = config.get("changed_lines", {})
        self.trust = Trust(trusted, unchanged, _get_ident(), written)
        their_trust = exposed["Trust"](trusted, unchanged, _get_ident(), written)
        self.machinery = Machinery(self.trust)
        if self.guards:
            self.machinery.learn(plugin_arguments(config["args"]), log)
        # The exposed copy's checks after every test learn of function writes from this hook;
        # the final checks (this copy's machinery) always walk everything.
        function_writes = []
        out["trust"] = their_trust
        out["machinery"] = exposed["Machinery"](
            their_trust, learned=self.machinery, function_writes=function_writes
        )
        self.guard = Guard(
            self.trust,
            config["hidden"],
            config.get("hashes", {}),
            guards=self.guards,
            function_writes=function_writes,
        )
        self.guard.active = True

    def finish(self, reporter, answer):
        """The final checks, then the answer on the report pipe, signed; never returns."""
        try:
            if reporter is not None:
                tampered = list(reporter.tampered)
                if self.guards:
                    found = final_checks(self.trust, self.machinery, reporter)
                    tampered += [t for t in found if t not in tampered]
                answer["tampered"] = tampered[:20]
            if self.guard is not None:
                answer["hidden_reads"] = self.guard.hidden_reads[:10]
                answer["refused"] = self.guard.refused[:20]
        except BaseException as exc:  # noqa: BLE001 - the answer is always written
            answer = {"ran": False, "error": f"final checks: {_type(exc).__name__}: {exc}"[:500]}
        _report(self.report_fd, "A " + self.token + " " + _ascii(plain(answer)))
        _exit(0)


def _enclave_open(source, report_fd, caller, guards):
    """Make the :class:`Enclave` from a private copy of this program and register it as an
    audit hook; keep no reference to either."""
    # Its own copy of the builtins, taken now: a name the submission rebinds in ``builtins``
    # later (``len``, ``getattr``, ``str``) is not what the enclave's code calls.
    private = {"__name__": "crucible_grading_enclave", "__builtins__": dict(vars(builtins))}
    exec(compile(source, RUNNER_NAME, "exec"), private)  # our own source: the enclave's copy
    sys.addaudithook(private["Enclave"](report_fd, caller, guards))


def main(raw, report_fd=REPORT_FD, source=b""):
    """Run the suite as ``raw`` (the JSON configuration) says; the enclave answers on the
    report pipe and exits. ``source`` is this program's own source (the enclave's and the
    exposed copies are made from it)."""
    config = json.loads(raw)
    guards = bool(config.get("guards", True))
    os.set_inheritable(report_fd, False)
    os.register_at_fork(after_in_child=lambda: _close(report_fd))
    if guards:
        _nondumpable()
    _enclave_open(source, report_fd, main.__code__, guards)
    private = tempfile.mkdtemp(prefix="grading-", dir="/tmp")
    os.chmod(private, 0o300)  # no listing: its files are found only by their random names
    name = secrets.token_hex(12)
    log_path = os.path.join(private, f"pytest-{name}.log")
    junit_path = os.path.join(private, f"junit-{name}.xml")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for variable in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(variable, None)
    if os.path.isdir(config["site"]):
        sys.path.insert(first_site_index(), config["site"])
    started = _monotonic()
    answer = {"ran": False}
    reporter = None
    try:
        try:
            import _pytest.config  # noqa: PLC0415 - only once the environment is on the path
            import pytest  # noqa: PLC0415
        except ImportError:
            answer["no_pytest"] = True
            raise

        for plugin in _pytest.config.default_plugins:
            importlib.import_module("_pytest." + plugin)
        for plugin in plugin_names(config["args"]):  # the task's -p plugins, from the environment
            builtin = plugin in _pytest.config.builtin_plugins
            importlib.import_module("_pytest." + plugin if builtin else plugin)
        for module in ("unittest.mock", "_pytest.assertion.rewrite", "_pytest.outcomes"):
            importlib.import_module(module)
        exposed = {"__name__": "crucible_grading_exposed", "__builtins__": builtins}
        exec(compile(source, RUNNER_NAME, "exec"), exposed)  # our own source: the exposed copy
        pytest.hookimpl(tryfirst=True)(exposed["Reporter"].pytest_runtest_makereport)
        pytest.hookimpl(trylast=True)(exposed["Reporter"].pytest_collection_modifyitems)
        if guards:
            their_trust = exposed["Trust"](config["trusted"], (), _get_ident())
            exposed["install_comparison_guards"](their_trust.is_test_file)
        # Never a cached rewrite of a test module: one planted at run time would be trusted.
        sys.modules["_pytest.assertion.rewrite"]._read_pyc = exposed["_no_cached_rewrite"]
        _no_sourceless_imports()
        armed = {}
        sys.audit(ARM, config, exposed, armed, log)
        wanted = set(config["ids"]) if config["ids"] is not None else None
        reporter = exposed["Reporter"](wanted, armed["trust"], armed["machinery"], guards)
        sys.dont_write_bytecode = True
        os.chdir(WORKSPACE)
        # After the standard library and the environment, before the system's site-packages: the
        # repository's own modules import as from its root, and a module it plants under a
        # standard or environment name (``statistics.py``, ``numpy.py``) shadows nothing.
        sys.path.insert(first_site_index(after=config["site"]), WORKSPACE)
        args = [
            *config["args"],
            "-c",
            config["config_file"],
            "--rootdir",
            WORKSPACE,
            "-p",
            "no:cacheprovider",
            "--junitxml",
            junit_path,
            "-o",
            "junit_family=xunit2",
            "-o",
            "junit_logging=no",
            "--continue-on-collection-errors",
        ]
        if not config["import_mode_set"]:
            args.append("--import-mode=append")  # test directories go last on sys.path too
        answer["version"] = pytest.__version__
        try:
            code = pytest.main(args, plugins=[reporter])
            answer["exit_code"] = int(code)
        except BaseException as exc:  # noqa: BLE001 - whatever the code under test raised
            answer["exit_code"] = None
            answer["escaped"] = _type(exc).__name__
        answer.update(
            ran=True,
            collected=reporter.collected,
            phases=reporter.phases,
            collect_errors=reporter.collect_errors,
            messages=reporter.messages,
            mismatch=reporter.mismatch,
            deselected=reporter.deselected,
        )
    except BaseException as exc:  # noqa: BLE001 - the harness reports, never crashes
        answer["error"] = f"{_type(exc).__name__}: {exc}"[:2000]
    answer["junit"] = junit_tally(junit_path)
    answer["log_tail"] = log_tail(log_path)
    answer["wall_s"] = round(_monotonic() - started, 3)
    sys.audit(FINISH, reporter, answer)
    _exit(0)  # only when the enclave was never made: the supervisor reads no answer
