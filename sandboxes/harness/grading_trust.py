"""Trust and the machinery snapshot of a repository grading's pytest process (part of the
runner: ``sandboxes/repository/runner.py`` sends this, ``grading_guard.py``,
``grading_checks.py`` and ``pytest_repository.py`` as one program).

:class:`Trust` says who wrote a code object, by its file name: the task's test files, the
workspace files the submission left unchanged, the environment, pytest and the standard
library are trusted; what the submission changed or added, code made at run time, ``/tmp``
are not. :class:`Machinery` is the test machinery as it was before any workspace code ran.
Standard library only (pytest is imported by the runner before any of it is used).
"""

import _thread
import ctypes
import hashlib
import os
import stat
import sys
import sysconfig
import tempfile
import threading
import time
import types
from itertools import chain
from operator import attrgetter, methodcaller
from operator import is_ as _is

# Taken before any workspace code runs, so a patched builtin or module cannot forge the answer.
# Only C functions: a Python function of the standard library (``os.path.realpath``,
# ``os.fsdecode``) looks its helpers up in ``os`` at every call, and a submission that rebinds
# ``os.lstat`` would run inside the audit hook, where nothing is refused.
_write, _exit, _monotonic, _getframe = os.write, os._exit, time.monotonic, sys._getframe
_lstat, _readlink, _getcwd, _S_ISLNK = os.lstat, os.readlink, os.getcwd, stat.S_ISLNK
_O_WRITING = os.O_WRONLY | os.O_RDWR | os.O_TRUNC
_ascii = ascii
_get_ident = _thread.get_ident
_type, _id, _isinstance, _sha256 = type, id, isinstance, hashlib.sha256
_str, _bytes, _int, _issubclass = str, bytes, int, issubclass
WORKSPACE = "/workspace"
REPORT_FD = 3
PR_SET_DUMPABLE = 4
LOG_TAIL_BYTES = 8192
MESSAGE_CHARS = 500
GENERIC_NAMES = frozenset(("__init__.py", "conftest.py", "__main__.py"))
PROCESS_EVENTS = frozenset(("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"))
MACHINERY_PREFIXES = ("_pytest", "pytest", "pluggy", "unittest")
MACHINERY_MODULES = ("builtins", "importlib._bootstrap", "importlib._bootstrap_external")
STDLIB = tuple(
    sorted({os.path.normpath(sysconfig.get_paths()[k]) + "/" for k in ("stdlib", "platstdlib")})
)
SITE_DIRS = ("/site-packages/", "/dist-packages/")
# Modules that hand out raw memory or interpreter internals: never for untrusted code.
NATIVE_BACKDOORS = (
    "_testcapi",
    "_testinternalcapi",
    "_testbuffer",
    "_ctypes_test",
    "_xxsubinterpreters",
    "cffi",  # its dlopen and raw memory raise no audit event, unlike ctypes'
    "_cffi_backend",
)
FRAME_ATTRIBUTES = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))


def _kind(value, kinds):
    """``isinstance`` by the object's real class: ``isinstance`` also asks the object for its
    ``__class__``, which a property of the submission's could answer (running its code)."""
    return _issubclass(_type(value), kinds)


def _one_of(kind, kinds):
    """``kind in kinds`` by identity (``in`` calls a metaclass's ``__eq__``)."""
    for candidate in kinds:
        if kind is candidate:
            return True
    return False


def _text(value):
    """``value`` as an exact ``str`` when it is a ``str`` or ``bytes`` (a file system name
    decoded as ``os.fsdecode`` does), else None. A subclass's methods are never called: what
    reaches the audit hook may be the submission's object."""
    if _type(value) is _str:
        return value
    if _kind(value, _str):
        return _str.__str__(value)  # an exact copy
    if _kind(value, _bytes):
        return _bytes.decode(value, "utf-8", "surrogateescape")
    return None


def _join(head, tail):
    """``posixpath.join`` of two exact strings."""
    if tail.startswith("/") or not head:
        return tail
    return head + tail if head.endswith("/") else head + "/" + tail


def _normpath(path):
    """``posixpath.normpath`` of an exact string (``//`` kept at the start, as POSIX allows)."""
    if not path:
        return "."
    lead = 2 if path.startswith("//") and not path.startswith("///") else int(path[:1] == "/")
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != ".." or (not lead and not parts) or (parts and parts[-1] == ".."):
            parts.append(part)
        elif parts:
            parts.pop()
    return "/" * lead + "/".join(parts) or "."


def _lexists(path):
    try:
        _lstat(path)
    except (OSError, ValueError):
        return False
    return True


def _realpath(path):
    """``posixpath.realpath`` (not strict) of an exact string, from the C calls taken above:
    every link followed, ``..`` applied after the link before it, a loop left as it is."""
    if not path.startswith("/"):
        path = _join(_getcwd(), path)
    resolved, _whole = _resolve("/", path, {})
    return _normpath(resolved)


def _resolve(path, rest, seen):
    """``path`` (resolved already) joined with ``rest``, links followed; ``(path, whether it
    resolved without a loop)``."""
    if rest.startswith("/"):
        path, rest = "/", rest[1:]
    while rest:
        name, _sep, rest = rest.partition("/")
        if name in ("", "."):
            continue
        if name == "..":
            head = path[: path.rfind("/") + 1]
            if head and head != "/" * len(head):
                head = head.rstrip("/")
            path = head or "/"
            continue
        candidate = _join(path, name)
        try:
            link = _S_ISLNK(_lstat(candidate).st_mode)
        except (OSError, ValueError):
            link = False
        if not link:
            path = candidate
            continue
        if candidate in seen:
            if seen[candidate] is not None:
                path = seen[candidate]
                continue
            return _join(candidate, rest), False  # a loop
        seen[candidate] = None
        try:
            target = _readlink(candidate)
        except OSError:
            path = candidate
            continue
        path, whole = _resolve(path, target, seen)
        if not whole:
            return _join(path, rest), False
        seen[candidate] = path
    return path, True


class Refused(PermissionError):
    """An operation the grading refuses to code under test (see the module)."""


class Trust:
    """Who wrote a piece of code, by its file name (which code under test can no longer fake:
    compiling under another name and building code objects are refused to it) and, in a file
    the submission changed, by its lines.

    ``trusted``: the task's test files (workspace-relative); ``unchanged``: the workspace files
    the submission left as the task version has them; ``changed_lines``: for each file the
    submission changed, the line numbers (of its new text) it wrote. Code on the other lines of
    a changed file is the project's own (a library's fix of one line does not make its
    decorators or signature helpers the submission's); a file the submission added is its own
    throughout.
    """

    UNTRUSTED, TRUSTED, STDLIB = "untrusted", "trusted", "stdlib"

    def __init__(self, trusted, unchanged, main_thread, changed_lines=None):
        self.trusted = frozenset(trusted)
        self.unchanged = frozenset(unchanged)
        self.changed = {p: frozenset(lines) for p, lines in (changed_lines or {}).items()}
        self.main_thread = main_thread
        self._cache = {}

    def of(self, filename):
        """The kind of a whole file (a changed file is untrusted: see :meth:`of_frame`)."""
        filename = _text(filename)  # a code object's name may be a str subclass of the code's
        if filename is None:
            return self.UNTRUSTED
        kind = self._cache.get(filename)
        if kind is None:
            kind = self._cache[filename] = self._classify(filename)
        return kind

    def _classify(self, filename):
        if not filename:
            return self.UNTRUSTED
        if filename.startswith("<frozen "):
            return self.STDLIB
        if filename.startswith("<"):
            return self.UNTRUSTED  # made at run time (exec, namedtuple...): whoever made it
        if filename == "crucible-grading-runner":
            return self.TRUSTED
        # Resolved, not just normalised: ``//workspace/...``, ``/dev/fd/N/...`` or a link would
        # otherwise name a workspace file by a path outside it (and be trusted).
        path = _realpath(filename if filename.startswith("/") else _join(WORKSPACE, filename))
        if path.startswith(WORKSPACE + "/"):
            rel = path[len(WORKSPACE) + 1 :]
            return self.TRUSTED if rel in self.trusted or rel in self.unchanged else self.UNTRUSTED
        if path.startswith(("/tmp/", "/dev/shm/", "/proc/")):
            return self.UNTRUSTED
        if path.startswith(STDLIB) and not any(s in path for s in SITE_DIRS):
            return self.STDLIB
        return self.TRUSTED  # pytest, the environment's packages, the system's

    def _written(self, filename):
        """The lines the submission wrote in ``filename`` (None: the whole file is its own)."""
        filename = _text(filename) or ""
        if not filename.startswith(WORKSPACE + "/"):
            return None
        return self.changed.get(filename[len(WORKSPACE) + 1 :])

    def of_frame(self, frame):
        """The kind of the code a frame is running, at the line it is on."""
        filename = frame.f_code.co_filename
        kind = self.of(filename)
        if kind == self.UNTRUSTED:
            written = self._written(filename)
            if written is not None and frame.f_lineno not in written:
                return self.TRUSTED
        return kind

    def of_code(self, code):
        """The kind of a code object: in a changed file, untrusted when any of its lines is
        one the submission wrote."""
        kind = self.of(code.co_filename)
        if kind == self.UNTRUSTED:
            written = self._written(code.co_filename)
            if written is not None:
                lines = {line for _start, _end, line in code.co_lines() if line is not None}
                if not lines & written:
                    return self.TRUSTED
        return kind

    def added(self, filename):
        """Whether ``filename`` is code the submission wrote throughout (a file it added, code
        made at run time, ``/tmp``), as opposed to a file of the task's it changed."""
        filename = _text(filename) or ""
        return self.of(filename) == self.UNTRUSTED and (
            not filename.startswith(WORKSPACE + "/") or self._written(filename) is None
        )

    def is_test_file(self, filename):
        filename = _text(filename) or ""
        path = _realpath(filename if filename.startswith("/") else _join(WORKSPACE, filename))
        return path.startswith(WORKSPACE + "/") and path[len(WORKSPACE) + 1 :] in self.trusted

    def culprit(self, frame):
        """The first frame from ``frame`` outward that is not the standard library's: where it
        is when the code it runs is untrusted, else None; a thread other than the main one that
        runs only the standard library (a ``Thread(target=shutil.copyfile, ...)``) counts as
        untrusted."""
        while frame is not None:
            kind = self.of_frame(frame)
            if kind == self.UNTRUSTED:
                return f"{_text(frame.f_code.co_filename) or '<unnamed>'}:{frame.f_lineno}"
            if kind == self.TRUSTED:
                return None
            frame = frame.f_back
        return None if _get_ident() == self.main_thread else "<a thread of the standard library>"


def first_site_index(after=""):
    """Where site-packages begin on ``sys.path`` (after ``after`` when it is there)."""
    for index, entry in enumerate(sys.path):
        if after and entry == after:
            continue
        if entry.endswith(("site-packages", "dist-packages")):
            return index
    return len(sys.path)


def _report(fd, line):
    """One line on the report pipe (ASCII), written whole."""
    data = line.encode("ascii") + b"\n"
    view = memoryview(data)
    while view:
        view = view[_write(fd, view) :]


def _nondumpable():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


# --- the machinery snapshot ---------------------------------------------------------------


def _function_state(value):
    """Identities that decide what a function does: code, defaults, closure contents."""
    cells = value.__closure__ or ()
    contents = []
    for cell in cells:
        try:
            contents.append(_id(cell.cell_contents))
        except ValueError:  # an empty cell
            contents.append(0)
    return (
        _id(getattr(value, "__code__", None)),
        _id(getattr(value, "__defaults__", None)),
        _id(getattr(value, "__kwdefaults__", None)),
        tuple(contents),
    )


# The key suffixes of a namespace entry's function state: the function's own, or a property's,
# classmethod's or staticmethod's parts'.
PARTS = ("fget", "fset", "fdel", "__func__")
FUNCTION_SUFFIXES = ("()", *(f".{part}()" for part in PARTS))


def _function_parts(value):
    """``(key suffix, function)`` of every function whose state the snapshot records for a
    namespace entry ``value``."""
    if _type(value) is types.FunctionType:
        return [("()", value)]
    if not _isinstance(value, (property, classmethod, staticmethod)):
        return []
    inner = [(f".{part}()", getattr(value, part, None)) for part in PARTS]
    return [(suffix, part) for suffix, part in inner if _type(part) is types.FunctionType]


def _own_class(module, value):
    """Whether a module's global ``value`` is a class of that module (its namespace is part of
    the snapshot), as opposed to one it imported."""
    return _isinstance(value, type) and getattr(value, "__module__", None) == module.__name__


def _members(prefix, namespace, ids, values):
    for name, value in list(namespace.items()):
        key = f"{prefix}.{name}"
        ids[key], values[key] = _id(value), value
        for suffix, function in _function_parts(value):
            ids[key + suffix] = _function_state(function)


def module_state(module, ids, values):
    """Add to ``ids`` the identity of a module's globals, of its classes' attributes, bases and
    metaclasses, and the state of the functions among them (:func:`_function_state`); to
    ``values`` the objects themselves."""
    namespace = vars(module)
    _members(module.__name__, namespace, ids, values)
    for name, value in list(namespace.items()):
        if _own_class(module, value):
            prefix = f"{module.__name__}.{name}"
            ids[prefix + ".__class__"] = _id(_type(value))
            ids[prefix + ".__bases__"] = tuple(_id(b) for b in value.__bases__)
            _members(prefix, dict(vars(value)), ids, values)


# The keys :func:`_members` gives one namespace entry (the entry's, then its functions' state).
ENTRY_SUFFIXES = ("", *FUNCTION_SUFFIXES)
_VALUES, _BASES, _CONTENTS = (
    methodcaller("values"),
    attrgetter("__bases__"),
    attrgetter("cell_contents"),
)


def _same(now, then):
    """Whether two fingerprints hold the same objects (by identity: an object's own ``==`` is
    never called), and the same lengths (the last part)."""
    if now is None or then is None or len(now) != len(then):
        return False
    *objects, lengths = now
    *objects_then, lengths_then = then
    if lengths != lengths_then:
        return False
    return all(
        len(part) == len(part_then) and all(map(_is, part, part_then))
        for part, part_then in zip(objects, objects_then)
    )


def _filled(cell):
    try:
        _CONTENTS(cell)
    except ValueError:  # an empty cell
        return False
    return True


def _hooks():
    """The trace and profile hooks, the interpreter's and ``threading``'s, by name."""
    return (
        ("sys.gettrace()", sys.gettrace()),
        ("sys.getprofile()", sys.getprofile()),
        ("threading._trace_hook", getattr(threading, "_trace_hook", None)),
        ("threading._profile_hook", getattr(threading, "_profile_hook", None)),
    )


def signature(value):
    """What kind of object ``value`` is, by provenance: the code it runs, or its class."""
    if value is None:
        return ("none",)
    if _type(value) is types.FunctionType:
        return ("code", _id(value.__code__))
    if _type(value) is types.MethodType:
        return ("method", _id(getattr(value.__func__, "__code__", None)))
    if _isinstance(value, (property, classmethod, staticmethod)):
        parts = (getattr(value, p, None) for p in ("fget", "fset", "fdel", "__func__"))
        return (_type(value).__name__, tuple(_id(getattr(f, "__code__", None)) for f in parts))
    if _isinstance(value, types.ModuleType):
        return ("module", getattr(value, "__name__", ""))
    return ("instance", _id(_type(value)))


DRY_SUITE = b"""
import logging
import unittest
import warnings

import pytest


@pytest.fixture(params=[1, 2])
def thing(request):
    yield request.param


def test_pass(thing):
    assert thing in (1, 2)


def test_fail():
    assert [1, 2] == [1, 3]


@pytest.mark.parametrize("x", [1, 2], ids=["one", "two"])
def test_param(x):
    assert x


def test_skip():
    pytest.skip("no")


@pytest.mark.skipif(True, reason="never")
def test_skipif():
    pass


@pytest.mark.xfail(strict=True)
def test_xfail():
    assert 0


def test_raises_warns_approx():
    with pytest.raises(ValueError):
        int("x")
    with pytest.warns(UserWarning):
        warnings.warn("w")
    assert 0.1 + 0.2 == pytest.approx(0.3)


def test_fixtures(tmp_path, monkeypatch, capsys, caplog, recwarn, request):
    monkeypatch.setenv("CRUCIBLE_DRY", "1")
    monkeypatch.setattr(logging, "raiseExceptions", True)
    (tmp_path / "f").write_text("x")
    print("out")
    logging.getLogger("dry").warning("logged")
    warnings.warn("recorded")
    assert capsys.readouterr().out == "out\\n" and caplog.records


class TestCase(unittest.TestCase):
    def test_ok(self):
        with self.subTest(i=1):
            self.assertEqual(1, 1)

    def test_no(self):
        self.assertEqual(1, 2)


class TestPlain:
    def test_method(self):
        assert "a" in "abc"
"""
DRY_MODULE = b'''
def twice(x):
    """
    >>> twice(2)
    4
    >>> twice(3)
    5
    """
    return 2 * x
'''


class Machinery:
    """The test machinery as it was before any workspace code ran, and what pytest itself
    changes in it as it runs (see :meth:`learn`)."""

    def __init__(self, trust, learned=None, function_writes=None):
        self.trust = trust
        # The audit hook appends to this list at every write of a function's ``__code__``,
        # ``__defaults__`` or ``__kwdefaults__`` (reading them raises an audit event of its own,
        # too dear to do for every function after every test). Without it every check is a
        # full one.
        self.function_writes = function_writes
        self._seen = None  # (layout, fingerprint) taken with the last full check
        self._pending = []  # (key, value) of every key the last full check found changed
        if learned is not None:  # a copy of what another Machinery took and learnt
            self.names, self.modules = list(learned.names), dict(learned.modules)
            self.baseline = dict(learned.baseline)
            self.allowed = {k: set(v) for k, v in learned.allowed.items()}
            return
        self.names = sorted(
            name
            for name in list(sys.modules)
            if name.split(".", 1)[0] in MACHINERY_PREFIXES or name in MACHINERY_MODULES
        )
        self.modules = {name: sys.modules[name] for name in self.names}
        self.baseline, _values = self.state()
        self.allowed = {}  # key -> signatures pytest's own run gave it

    def state(self):
        ids, values = {}, {}
        for name, module in self.modules.items():
            ids[f"sys.modules[{name!r}]"] = _id(sys.modules.get(name))
            module_state(module, ids, values)
        for name, value in _hooks():
            ids[name] = _id(value)
        return ids, values

    def _changed(self):
        ids, values = self.state()
        keys = set(ids) | set(self.baseline)
        return [k for k in keys if ids.get(k) != self.baseline.get(k)], values

    @staticmethod
    def _base_key(key):
        for suffix in FUNCTION_SUFFIXES:
            if key.endswith(suffix):
                return key[: -len(suffix)]
        return key

    def record(self):
        """Note what changed since the baseline as pytest's own doing (the dry run)."""
        changed, values = self._changed()
        for key in changed:
            base = self._base_key(key)
            self.allowed.setdefault(base, set()).add(signature(values.get(base)))

    def learn(self, plugin_args, log):
        """Run pytest once on a small suite of its own, in this process, before any workspace
        code: the names pytest's plugins set as they configure, collect and run (and what
        kind of value each gets) are the changes a real run may show; then take the baseline
        again (what stays, such as submodules imported, is part of it)."""
        import pytest  # noqa: PLC0415 - imported already

        directory = tempfile.mkdtemp(prefix="dry-", dir="/tmp")
        with open(os.path.join(directory, "test_dry.py"), "wb") as handle:
            handle.write(DRY_SUITE)
        with open(os.path.join(directory, "dry_module.py"), "wb") as handle:
            handle.write(DRY_MODULE)
        with open(os.path.join(directory, "dry.ini"), "wb") as handle:
            handle.write(b"[pytest]\n")
        machinery = self

        class Recorder:
            @pytest.hookimpl(trylast=True)
            def pytest_configure(self, config):
                machinery.record()

            def pytest_collection_finish(self, session):
                machinery.record()

            def pytest_runtest_logreport(self, report):
                machinery.record()

            @pytest.hookimpl(tryfirst=True)
            def pytest_unconfigure(self, config):
                machinery.record()

        args = [
            directory,
            *plugin_args,
            "-c",
            os.path.join(directory, "dry.ini"),
            "--rootdir",
            directory,
            "-p",
            "no:cacheprovider",
            "--junitxml",
            os.path.join(directory, "junit.xml"),
            "--doctest-modules",
            "-q",
        ]
        pytest.main(args, plugins=[Recorder()])
        os.write(log, b"\n[crucible] the grading's own dry run ends here\n")
        self.record()
        self.baseline, _values = self.state()

    def changes(self):
        """Names whose identity changed, appeared or disappeared since the baseline, but for
        what pytest's own run changes (the same names, given values of the same provenance)
        and submodules imported since.

        A check after every test would walk 13,000 names and read every function's code (an
        audited read: 40 ms a test in the sandbox). So when nothing the state is made of
        changed since the last full check (its :meth:`_fingerprint`: the same objects in every
        namespace, class, closure cell and hook, and no function's code or defaults written),
        the answer is the same but for the names that check found changed: those are read and
        judged again (pytest sets some at every test), the rest is not walked."""
        seen = self._seen
        if seen is not None:
            layout, masked, expected = seen
            if _same(self._fingerprint(layout, masked), expected):
                try:
                    return self._judge(self._pending + self._entries_changed(masked))
                except KeyError:  # an entry removed since (by another thread): walk
                    pass
        layout = self._layout()
        # Taken before the state: whatever changes after it shows in the next check.
        fingerprint = self._fingerprint(layout)
        changed, values = self._changed()
        pairs = [(key, values.get(self._base_key(key))) for key in changed]
        masked = self._entries(layout, {self._base_key(key) for key in changed})
        names = {f"{prefix}.{name}" for _position, prefix, _space, name in masked}
        self._pending = [(key, value) for key, value in pairs if self._base_key(key) not in names]
        self._seen = None
        if self.function_writes is not None and fingerprint is not None:
            for position, *_entry in masked:
                fingerprint[2][position] = None
            self._seen = (layout, masked, fingerprint)
        return self._judge(pairs)

    def _judge(self, pairs):
        found = []
        for key, value in pairs:
            base = self._base_key(key)
            if base.endswith(".__warningregistry__") or base == "builtins._":
                continue  # the warnings module's cache; the display hook's last value (doctests)
            if signature(value) in self.allowed.get(base, ()):
                continue
            if _isinstance(value, types.ModuleType) and self._submodule(base, value):
                continue
            found.append(key)
        return sorted(set(found))

    def _layout(self):
        """What :meth:`state` reads, as the modules now stand: ``(namespaces, their key
        prefixes, classes, other classes, closure cells with contents, empty cells)``. The
        namespaces are the modules' and their own classes'; the other classes are those a
        module merely holds (a class becomes the module's own when its ``__module__`` says
        so)."""
        spaces, prefixes, classes, others, cells, empty = [], [], [], [], [], []
        for module in self.modules.values():
            namespace = vars(module)
            spaces.append(namespace)
            prefixes.append(module.__name__)
            for name, value in list(namespace.items()):
                if _own_class(module, value):
                    classes.append(value)
                    spaces.append(vars(value))
                    prefixes.append(f"{module.__name__}.{name}")
                elif _isinstance(value, type):
                    others.append(value)
        for space in spaces:
            for value in list(space.values()):
                for _suffix, function in _function_parts(value):
                    for cell in function.__closure__ or ():
                        (cells if _filled(cell) else empty).append(cell)
        return spaces, prefixes, classes, others, cells, empty

    def _fingerprint(self, layout, masked=()):
        """The objects :meth:`state` would read through ``layout``, but for the functions'
        code and defaults (counted by the audit hook instead) and the ``masked`` entries'
        values, as flat lists (:func:`_same` compares them); None when the layout no longer
        fits (a cell emptied, a namespace changed while it was read). Objects, not their
        ``id``: ``id()`` raises an audit event, one per object."""
        spaces, _prefixes, classes, others, cells, empty = layout
        try:
            values = list(chain.from_iterable(map(_VALUES, spaces)))
            for position, *_entry in masked:
                values[position] = None
            return [
                list(map(sys.modules.get, self.names)),
                list(chain.from_iterable(spaces)),
                values,
                list(map(_type, classes)),
                list(map(_BASES, classes)),
                [getattr(value, "__module__", None) for value in others],
                list(map(_CONTENTS, cells)),
                [_filled(cell) for cell in empty],
                [hook for _name, hook in _hooks()],
                # Compared by value: exact ints.
                [*map(len, spaces), len(self.function_writes or ())],
            ]
        except (ValueError, RuntimeError, IndexError):
            return None

    @staticmethod
    def _entries(layout, bases):
        """The namespace entries named in ``bases``: ``(position in the fingerprint's values,
        key prefix, namespace, name)`` each; not a class of the module (its namespace is part
        of the layout)."""
        spaces, prefixes = layout[0], layout[1]
        found, offset = [], 0
        for space, prefix in zip(spaces, prefixes):
            for index, (name, value) in enumerate(list(space.items())):
                if f"{prefix}.{name}" in bases and not _isinstance(value, type):
                    found.append((offset + index, prefix, space, name))
            offset += len(space)
        return found

    def _entries_changed(self, masked):
        """``(key, value)`` of the masked entries' keys (:func:`_members`') that differ from the
        baseline now."""
        ids, values, keys = {}, {}, []
        for _position, prefix, space, name in masked:
            _members(prefix, {name: space[name]}, ids, values)
            keys += [f"{prefix}.{name}{suffix}" for suffix in ENTRY_SUFFIXES]
        return [
            (key, values.get(self._base_key(key)))
            for key in keys
            if ids.get(key) != self.baseline.get(key)
        ]

    def _submodule(self, key, module):
        name = getattr(module, "__name__", "")
        where = getattr(module, "__file__", None) or ""
        return (
            key == name
            and sys.modules.get(name) is module
            and self.trust.of(where) != Trust.UNTRUSTED
        )

    def real(self, module_name, qualname):
        """The object ``module_name.qualname`` as it was (None when there was none)."""
        module = self.modules.get(module_name)
        value = module
        for part in qualname.split("."):
            value = getattr(value, part, None) if value is not None else None
        return value
