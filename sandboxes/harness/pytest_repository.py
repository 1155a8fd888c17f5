"""The pytest runner of a repository grading, inside a fresh sandbox session.

Sent on the standard input of ``python3 -I -c BOOT`` (``sandboxes/repository/grading.py``):
the first line a JSON configuration, the rest this source, which BOOT compiles and whose
:func:`main` it calls with the configuration. Nothing of it lies in the workspace, and the
nonce that frames its answer lives only in :func:`main`'s locals. Standard library and pytest.

Before any workspace code can run (``-I``: no ``PYTHONPATH``, user site or script directory
on ``sys.path``, so no ``sitecustomize``/``usercustomize``/``.pth`` of the workspace loads):

* the environment's packages go on ``sys.path``; pytest, pluggy, every default plugin and
  what this module needs are imported; a snapshot is taken of the functions and classes of
  pytest's and pluggy's runtime modules (their identities and code objects);
* ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` is set (no ``pytest11`` entry point, even one a planted
  ``*.dist-info`` declares), ``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS`` are dropped;
* stdout and stderr go to a log file under a fresh private ``/tmp`` directory; a private copy
  of the call's stdout is kept for the answer.

pytest then runs with the task version's configuration only (``-c``, ``--rootdir``), no cache
provider, and a reporter plugin (:class:`Reporter`) given as an object: it keeps the selected
ids (every other collected item is deselected), records each phase's outcome, notes a call
that raised but was reported passed, re-checks the snapshot after every test, and lists
plugins or hook implementations registered from anywhere but the trusted files. Its junit
XML (written to the private directory) is parsed afterwards as a second tally.

At the end every other process of the session is killed (``kill(-1)``: a forked child cannot
outlive pytest and write afterwards), and one frame, ``<nonce> BEGIN <json> <nonce> END``, is
written as the last bytes of the call's stdout (a Python literal made by ``ascii``, read on
the host with ``ast.literal_eval``); then ``os._exit`` (no ``atexit`` hook of the
code under test runs after it). The host trusts nothing else.
"""

import importlib
import json
import os
import signal
import sys
import tempfile
import time
import types
import xml.etree.ElementTree as ElementTree  # imported before any workspace code can shadow it

# Taken before any workspace code runs, so a patched builtin or module cannot forge the answer.
_ascii, _write, _exit, _kill, _monotonic = ascii, os.write, os._exit, os.kill, time.monotonic
WORKSPACE = "/workspace"
WATCHED_EVENTS = frozenset(
    ("open", "os.link", "os.rename", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn")
)
LOG_TAIL_BYTES = 8192
MESSAGE_CHARS = 500
WATCHED = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.main",
    "_pytest.skipping",
    "_pytest.junitxml",
    "_pytest.outcomes",
    "_pytest.nodes",
    "_pytest.unittest",
    "_pytest.terminal",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "pluggy._result",
)


def _code_identities(module):
    """``{qualified name: identity}`` of a module's globals and of its classes' attributes
    (functions also by their code object)."""
    seen = {}
    for name, value in list(vars(module).items()):
        key = f"{module.__name__}.{name}"
        seen[key] = id(value)
        code = getattr(value, "__code__", None)
        if code is not None:
            seen[key + ".__code__"] = id(code)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in list(vars(value).items()):
                seen[f"{key}.{attr}"] = id(member)
                for part in (member, getattr(member, "fget", None)):
                    inner = getattr(part, "__code__", None)
                    if inner is not None:
                        seen[f"{key}.{attr}.__code__"] = id(inner)
    return seen


def snapshot(modules):
    seen = {}
    for module in modules:
        seen.update(_code_identities(module))
    return seen


class Reporter:
    """The grading's own pytest plugin (registered as an object, never from the workspace)."""

    def __init__(self, wanted, trusted, modules, baseline):
        self.wanted = wanted  # set of node ids, or None: every collected item
        self.trusted = trusted  # workspace-relative paths of the task's test files
        self.modules = modules
        self.baseline = baseline
        self.config = None
        self.collected = []
        self.phases = {}  # node id -> {when: outcome}
        self.raised = set()  # node ids whose call raised (not a skip or xfail)
        self.collect_errors = {}
        self.messages = {}  # node id -> the first failure's one-line message
        self.mismatch = []
        self.tampered = []
        self.foreign = []
        self.deselected = 0

    def check(self):
        now = snapshot(self.modules)
        changed = sorted(k for k, v in self.baseline.items() if now.get(k) != v)
        for key in changed:
            if key not in self.tampered:
                self.tampered.append(key)

    def pytest_configure(self, config):
        self.config = config

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
        self.collected = [item.nodeid for item in session.items]
        self.check()

    def pytest_runtest_makereport(self, item, call):
        if call.when == "call" and call.excinfo is not None:
            import _pytest.outcomes  # noqa: PLC0415 - imported already, before the workspace

            skip = (_pytest.outcomes.Skipped, _pytest.outcomes.XFailed)
            if not isinstance(call.excinfo.value, skip):
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

    def foreign_plugins(self):
        """Plugins and hook implementations registered since pytest started whose code is
        not pytest's, pluggy's, the environment's, the standard library's or a trusted file's."""
        found = []
        for name, plugin in self.config.pluginmanager.list_name_plugin():
            if plugin is None or plugin is self:
                continue
            if isinstance(plugin, types.ModuleType):
                where = getattr(plugin, "__file__", None)
            else:
                kind = plugin if isinstance(plugin, type) else type(plugin)
                defining = sys.modules.get(getattr(kind, "__module__", ""), None)
                where = getattr(defining, "__file__", None)
            if not where or not self._trusted_file(where):
                found.append(f"plugin {name!r} ({type(plugin).__name__})")
        for hook_name in dir(self.config.hook):
            caller = getattr(self.config.hook, hook_name, None)
            for impl in getattr(caller, "get_hookimpls", lambda: [])():
                if impl.plugin is self:
                    continue
                code = getattr(getattr(impl, "function", None), "__code__", None)
                if code is not None and not self._trusted_file(code.co_filename):
                    found.append(f"hook {hook_name} from {code.co_filename}")
        return sorted(set(found))[:20]

    def _trusted_file(self, path):
        path = os.path.realpath(path) if path else ""
        if path.startswith(WORKSPACE + "/"):
            return path[len(WORKSPACE) + 1 :] in self.trusted
        return not path.startswith(("<", "/tmp", "/dev/shm")) and path != ""


def guard_hidden(hidden, trusted):
    """Refuse, and record, any read of a hidden test file by code of the workspace that is not
    a trusted test file: an audit hook (it cannot be removed) on ``open`` (the path resolved,
    so a link to it counts), ``os.link``/``os.rename`` of it, and processes started with its
    name in their arguments, whenever such code is on the calling stack. pytest's own reads
    (collection, assertion rewriting, tracebacks) have no workspace code on the stack.

    Returns:
        the list the hook appends its findings to.
    """
    found = []
    names = tuple({path.rsplit("/", 1)[-1] for path in hidden})
    absolute = {WORKSPACE + "/" + path for path in hidden}
    getframe, realpath, busy = sys._getframe, os.path.realpath, [False]

    def culprit():
        frame = getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(WORKSPACE + "/") and name[len(WORKSPACE) + 1 :] not in trusted:
                return name
            frame = frame.f_back
        return None

    def touches(event, args):
        if event == "open":
            return isinstance(args[0], (str, bytes)) and realpath(os.fsdecode(args[0])) in absolute
        if event in ("os.link", "os.rename"):
            return any(
                realpath(os.fsdecode(a)) in absolute
                for a in args[:2]
                if isinstance(a, (str, bytes))
            )
        text = " ".join(str(a) for a in args[:3])
        return any(name in text for name in names)

    def hook(event, args):
        if busy[0] or event not in WATCHED_EVENTS:
            return
        busy[0] = True
        try:
            if touches(event, args):
                who = culprit()
                if who is not None:
                    found.append(f"{event} by {who}")
                    raise PermissionError("hidden test files cannot be read by the code under test")
        finally:
            busy[0] = False

    if hidden:
        sys.addaudithook(hook)
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


def main(raw):
    """Run the suite as ``raw`` (the JSON configuration) says; write the frame; exit."""
    config = json.loads(raw)
    nonce = config["nonce"]
    answer_fd = os.dup(1)
    os.set_inheritable(answer_fd, False)
    private = tempfile.mkdtemp(prefix="grading-", dir="/tmp")
    log_path = os.path.join(private, "pytest.log")
    junit_path = os.path.join(private, "junit.xml")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    if os.path.isdir(config["site"]):
        sys.path.insert(0, config["site"])
    started = _monotonic()
    answer = {"ran": False}
    try:
        try:
            import _pytest.config  # noqa: PLC0415 - only once the environment is on the path
            import pytest  # noqa: PLC0415
        except ImportError:
            answer["no_pytest"] = True
            raise

        for name in _pytest.config.default_plugins:
            importlib.import_module("_pytest." + name)
        for name in plugin_names(config["args"]):  # the task's -p plugins, from the environment
            builtin = name in _pytest.config.builtin_plugins
            importlib.import_module("_pytest." + name if builtin else name)
        modules = [importlib.import_module(name) for name in WATCHED]
        baseline = snapshot(modules)
        wanted = set(config["ids"]) if config["ids"] is not None else None
        Reporter.pytest_runtest_makereport = pytest.hookimpl(tryfirst=True)(
            Reporter.pytest_runtest_makereport
        )
        Reporter.pytest_collection_modifyitems = pytest.hookimpl(trylast=True)(
            Reporter.pytest_collection_modifyitems
        )
        reporter = Reporter(wanted, set(config["trusted"]), modules, baseline)
        sys.dont_write_bytecode = True  # no .pyc of a hidden test for the code to read
        hidden_reads = guard_hidden(config["hidden"], set(config["trusted"]))
        os.chdir(WORKSPACE)
        sys.path.insert(0, WORKSPACE)  # as ``python -m pytest`` from the repository's root
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
        answer["version"] = pytest.__version__
        try:
            code = pytest.main(args, plugins=[reporter])
            answer["exit_code"] = int(code)
        except BaseException as exc:  # noqa: BLE001 - whatever the code under test raised
            answer["exit_code"] = None
            answer["escaped"] = type(exc).__name__
        reporter.check()
        answer.update(
            ran=True,
            collected=reporter.collected,
            phases=reporter.phases,
            collect_errors=reporter.collect_errors,
            messages=reporter.messages,
            mismatch=reporter.mismatch,
            tampered=reporter.tampered[:20],
            foreign=reporter.foreign_plugins() if reporter.config is not None else [],
            deselected=reporter.deselected,
            hidden_reads=hidden_reads[:10],
        )
    except BaseException as exc:  # noqa: BLE001 - the harness reports, never crashes
        answer["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    try:
        _kill(-1, signal.SIGKILL)  # every other process of the session (never pid 1 or us)
    except OSError:
        pass
    answer["junit"] = junit_tally(junit_path)
    answer["log_tail"] = log_tail(log_path)
    answer["wall_s"] = round(_monotonic() - started, 3)
    frame = ("\n" + nonce + " BEGIN " + _ascii(answer) + " " + nonce + " END\n").encode("ascii")
    view = memoryview(frame)
    while view:
        view = view[_write(answer_fd, view) :]
    _exit(0)
