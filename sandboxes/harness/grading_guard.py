"""The audit hook of a repository grading's pytest process (part of the runner, after
``grading_trust.py``): PEP 578 hooks cannot be removed, so what it refuses stays refused.

:class:`Guard` refuses to *untrusted* code (:class:`Trust`) what honest code never needs: heap
walks, other threads' frames, trace and profile hooks, frames of the test machinery, a test
function's code, code objects built by hand or unmarshalled, source compiled under a name
that is not its own, ``ctypes`` and ``_testcapi``-like modules, ``/proc/<pid>/mem``, writes
to test files; and to any code but the task's tests, reads of hidden test files. Test files
compile only from their exact bytes or through pytest's own assertion rewriter.
"""

import importlib
import importlib.machinery
import inspect
import logging
import pathlib
import sys
import traceback
from types import (
    AsyncGeneratorType,
    CoroutineType,
    FrameType,
    FunctionType,
    GeneratorType,
    MemberDescriptorType,
    TracebackType,
)

try:  # on the host (tests); in the sandbox grading_trust's source comes first
    from sandboxes.harness.grading_trust import (
        _O_WRITING,
        FRAME_ATTRIBUTES,
        GENERIC_NAMES,
        NATIVE_BACKDOORS,
        PROCESS_EVENTS,
        WORKSPACE,
        Refused,
        Trust,
        _bytes,
        _get_ident,
        _getcwd,
        _getframe,
        _int,
        _join,
        _kind,
        _lexists,
        _normpath,
        _one_of,
        _realpath,
        _sha256,
        _str,
        _text,
        _type,
    )
except ImportError:
    pass


# The objects whose frame attributes raise ``object.__getattr__`` (an event anyone can raise with
# objects of their own: only these are read).
FRAME_HOLDERS = (TracebackType, GeneratorType, CoroutineType, AsyncGeneratorType, FrameType)


def _words(value, depth=0):
    """The strings in ``value`` (a process event's program, arguments, directory), exact
    copies; what is not text, or a list or tuple of it, is left out unread."""
    text = _text(value)
    if text is not None:
        return [text]
    if depth < 2 and _one_of(_type(value), (list, tuple)):
        return [word for item in value for word in _words(item, depth + 1)]
    return []


def _slot(name):
    """The member descriptor of ``pathlib.PurePath``'s slot ``name`` (None without one)."""
    for base in pathlib.PurePath.__mro__:
        found = vars(base).get(name)
        if _type(found) is MemberDescriptorType:
            return found
    return None


# pathlib's own classes and the slots that hold a path's text, taken before any workspace code
# runs: Python 3.12 and later keep the arguments (``_raw_paths``), 3.11 the parsed parts.
PATH_TYPES = (pathlib.PurePath, pathlib.PurePosixPath, pathlib.Path, pathlib.PosixPath)
_RAW_PATHS, _DRV, _ROOT, _PARTS = (_slot(n) for n in ("_raw_paths", "_drv", "_root", "_parts"))


def _path_text(value):
    """What a path names, as an exact ``str``: text, or one of pathlib's own paths read from its
    slots (its methods, which the submission could patch, are never called); else None."""
    text = _text(value)
    if text is not None or not _one_of(_type(value), PATH_TYPES):
        return text
    try:
        if _RAW_PATHS is not None:
            parts = [_text(part) for part in _RAW_PATHS.__get__(value)]
            if None in parts:
                return None
            joined = ""
            for part in parts:
                joined = _join(joined, part)
            return joined or "."
        if _PARTS is not None:
            head = (_text(_DRV.__get__(value)) or "") + (_text(_ROOT.__get__(value)) or "")
            parts = [_text(part) for part in _PARTS.__get__(value)]
            if None in parts:
                return None
            return head + "/".join(parts[1:]) if head else "/".join(parts) or "."
    except AttributeError:  # a slot never set
        return None
    return None


def _class_attribute(klass, name):
    """``name`` as ``klass`` and its bases hold it, read from their namespaces: a descriptor the
    submission planted there is returned, never called."""
    for base in klass.__mro__:
        namespace = vars(base)
        if name in namespace:
            return namespace[name]
    return None


class Guard:
    """The audit hook of the first line (see the module): refusals, and what it saw."""

    def __init__(self, trust, hidden, hashes, *, guards=True, function_writes=None):
        self.trust = trust
        self.guards = guards
        # Every write of a function's code or defaults, whoever writes it: the machinery
        # check's cue (``Machinery.function_writes``).
        self.function_writes = function_writes
        self.hidden = frozenset(_join(WORKSPACE, p) for p in hidden)
        self.hidden_names = frozenset(p.rsplit("/", 1)[-1] for p in hidden)
        self.telling = frozenset(
            {*(n for n in self.hidden_names if n not in GENERIC_NAMES), *hidden}
        )
        self.hashes = {_join(WORKSPACE, p): h for p, h in hashes.items()}
        self.refused = []
        self.hidden_reads = []
        # Per thread: the frames that raised the events its handlers are handling (innermost
        # last), and whether it is inspecting a nested event (see __call__).
        self.frames = {}
        self.inspecting = set()
        self.active = False
        bootstrap = importlib._bootstrap_external
        self.import_steps = {
            bootstrap._compile_bytecode.__code__: "marshal",
            bootstrap.SourceLoader.source_to_code.__code__: "compile",
        }
        self.get_code = bootstrap.SourceLoader.get_code.__code__
        self.frames_removed = importlib._bootstrap._call_with_frames_removed.__code__
        self.loader_class = importlib.machinery.SourceFileLoader
        self.loader_methods = {
            name: getattr(self.loader_class, name)
            for name in ("get_data", "get_code", "path_stats", "source_to_code", "get_filename")
        }
        rewrite = sys.modules.get("_pytest.assertion.rewrite")  # imported already, if at all
        self.rewrite_test = rewrite._rewrite_test.__code__ if rewrite is not None else None
        self.frame_returning = {
            inspect.currentframe.__code__,
            inspect.stack.__code__,
            inspect.trace.__code__,
            inspect.getouterframes.__code__,
            inspect.getinnerframes.__code__,
            traceback.walk_stack.__code__,
            traceback.walk_tb.__code__,
            logging.currentframe.__code__,
        }
        # Standard-library functions that turn frames into text for their caller.
        self.consumers = {
            logging.Logger.findCaller.__code__,
            traceback.extract_stack.__code__,
            traceback.format_stack.__code__,
            traceback.print_stack.__code__,
            traceback.TracebackException.__init__.__code__,
            traceback.StackSummary._extract_from_extended_frame_gen.__code__,
        }
        hidden_only = ("open", "os.link", "os.symlink", "os.rename", *PROCESS_EVENTS)
        self.handlers = (
            dict(self.HANDLERS) if guards else {e: self.HANDLERS[e] for e in hidden_only}
        )

    def refuse(self, what, who):
        if len(self.refused) < 50:
            self.refused.append(f"{what} by {who}")
        raise Refused(f"refused in grading: {what}")

    @property
    def frame(self):
        """The Python frame that raised the event this thread's handler is handling."""
        return self.frames[_get_ident()][-1]

    def __call__(self, event, args, depth=1):
        """The hook; ``depth``: how far up the stack the frame that raised the event is (1 when
        the interpreter calls this, 2 through the enclave's own hook).

        An event raised while one of this thread's handlers runs comes from the handler's own
        reads (let through: handling them would recurse), or from code that ran inside the
        handler without being called by it (a finalizer the garbage collector ran, a signal
        handler): that code's events are handled like any other, re-entrantly, where they used
        to pass unrefused. The state is per thread: another thread's events are handled as
        always while this one's handler runs (they used to pass too). What such code does
        without an audited operation (``f_back`` from its own frame) no audit hook sees."""
        if not self.active:
            return
        handler = self.handlers.get(event)
        if handler is None and self.guards and event.startswith("ctypes."):
            handler = Guard._ctypes
        if handler is None:
            return
        thread = _get_ident()
        if thread in self.inspecting:
            return  # the nested check's own frame read
        self._handle(thread, handler, args, depth + 1)

    def _handle(self, thread, handler, args, depth):
        stack = self.frames.get(thread)
        self.inspecting.add(thread)
        try:
            frame = _getframe(depth)
            if stack and self.trust.culprit(frame) is None:
                return  # a handler's own read (or trusted code inside it)
        finally:
            self.inspecting.discard(thread)
        if stack is None:
            stack = self.frames[thread] = []
        stack.append(frame)
        try:
            handler(self, args)
        finally:
            stack.pop()
            if not stack:
                del self.frames[thread]

    # Helpers.
    def _untrusted_caller(self, what):
        who = self.trust.culprit(self.frame)
        if who is not None:
            self.refuse(what, who)

    def _path(self, value):
        """The absolute path an event names; None for a descriptor (an int). A path given as
        an object the grading cannot read without running its code (an ``os.PathLike`` of the
        code's own, handed straight to ``os.open`` or ``io.FileIO``) is refused to untrusted
        code: its ``__fspath__`` would run here, where nothing is refused."""
        if _kind(value, _int):
            return None
        path = _path_text(value)
        if path is None:
            self._untrusted_caller("naming a file by an object of its own")
            return None
        return _normpath(path if path.startswith("/") else _join(_getcwd(), path))

    # Events.
    def _gc(self, args):
        self._untrusted_caller("a walk of the heap (gc)")

    def _frames(self, args):
        self._untrusted_caller("other threads' frames")

    def _trace(self, args):
        self._untrusted_caller("a trace or profile hook")

    def _code_new(self, args):
        self._untrusted_caller("a code object built by hand")

    def _ctypes(self, args):
        self._untrusted_caller("native memory (ctypes)")

    def _import(self, args):
        name = (_text(args[0]) if args else None) or ""
        if name.split(".", 1)[0] in NATIVE_BACKDOORS:
            self._untrusted_caller(f"importing {name}")

    def _genuine_import(self, step):
        """The loader of a genuine import, when the event is importlib's own ``step``, called by
        ``SourceLoader.get_code`` of an unpatched ``SourceFileLoader``; else None."""
        frame = self.frame
        if frame.f_code is self.frames_removed and frame.f_back is not None:
            frame = frame.f_back  # importlib calls compile through _call_with_frames_removed
        if self.import_steps.get(frame.f_code) != step:
            return None
        outer = frame.f_back
        if outer is None or outer.f_code is not self.get_code:
            return None
        loader = outer.f_locals.get("self")
        if _type(loader) is not self.loader_class:
            return None
        own = vars(loader)  # an exact loader's: no property of the submission's runs
        if any(dict.__contains__(own, name) for name in self.loader_methods):
            return None
        for name, method in self.loader_methods.items():
            if _class_attribute(self.loader_class, name) is not method:
                return None
        return loader

    def _marshal(self, args):
        loader = self._genuine_import("marshal")
        # Cached bytecode of the standard library and the environment; never the workspace's,
        # whoever imports it (no honest grading has any: it is stripped and never written).
        # the loader's own attribute (a property planted on the class is never run)
        where = (_text(dict.get(vars(loader), "path")) or "") if loader is not None else ""
        if loader is not None and where.startswith(WORKSPACE + "/"):
            self.refuse("bytecode of the workspace", where)
        if loader is None:
            self._untrusted_caller("unmarshalled code")

    def _compile(self, args):
        source, filename = args[0], _text(args[1])
        if filename is None or filename.startswith("<"):
            return
        path = _normpath(filename if filename.startswith("/") else _join(WORKSPACE, filename))
        expected = self.hashes.get(path)
        if expected is not None:  # a test file: loaded from its exact bytes only
            if _kind(source, (_bytes, _str)):
                data = (
                    _str.encode(source, "utf-8")
                    if _kind(source, _str)
                    else _bytes.join(b"", [source])  # an exact copy
                )
                if _sha256(data).hexdigest() != expected:
                    if self._loading_a_module():
                        self.refuse(f"loading other code as {filename}", "the process")
                    # A test may compile a snippet under its own name (traceback tests do).
                    self._untrusted_caller(f"compiling other code as {filename}")
            elif self.frame.f_code is not self.rewrite_test:
                self._untrusted_caller(f"compiling a tree as {filename}")
            return
        if self._genuine_import("compile") is not None:
            return
        if not self.trust.added(path):  # a name that is not wholly its own
            self._untrusted_caller(f"compiling code as {filename}")

    def _loading_a_module(self):
        """Whether the compile event belongs to loading a module: pytest's assertion rewriter
        (``ast.parse`` inside ``_rewrite_test``) or importlib's own step."""
        frame, depth = self.frame, 0
        while frame is not None and depth < 4:
            if frame.f_code is self.rewrite_test or frame.f_code in self.import_steps:
                return True
            frame, depth = frame.f_back, depth + 1
        return False

    def _frame_reach(self, what, returned):
        """Refuse a frame of the machinery (pytest, pluggy, the runner, the standard library's
        callers of them) to code under test: asked for by untrusted code, or by a
        standard-library function that returns frames, called by untrusted code with no
        standard-library consumer of frames in between. A frame of the workspace (the tests',
        the project's: ``namedtuple``-like helpers read their caller's module) is not refused:
        the runner keeps nothing there, and what a test frame holds is the differential's and
        the detectors' to judge."""
        if _type(returned) is not FrameType:
            return
        if (_text(returned.f_code.co_filename) or "").startswith(WORKSPACE + "/"):
            return
        frame = self.frame
        kind = self.trust.of_frame(frame)
        if kind == Trust.TRUSTED:
            return
        if kind == Trust.UNTRUSTED:
            self.refuse(what, f"{_text(frame.f_code.co_filename)}:{frame.f_lineno}")
        walk, returns = frame, False
        while walk is not None and self.trust.of_frame(walk) == Trust.STDLIB:
            if walk.f_code in self.consumers:
                return
            returns = returns or walk.f_code in self.frame_returning
            walk = walk.f_back
        who = self.trust.culprit(frame)
        if who is not None and (returns or walk is None):
            self.refuse(what, who)

    def _getframe_event(self, args):
        self._frame_reach(
            "a frame of the test machinery (sys._getframe)", args[0] if args else None
        )

    def _getattr(self, args):
        # A test function's ``__code__`` is not refused: libraries inspect the functions they
        # are given (toolz's curry, signature helpers); reading its constants is for the
        # detectors (``reads_expected_values``) and the differential.
        name = _text(args[1]) if len(args) > 1 else None
        if name in FRAME_ATTRIBUTES and _one_of(_type(args[0]), FRAME_HOLDERS):
            returned = getattr(args[0], name, None)
            self._frame_reach(f"a frame of the test machinery ({name})", returned)

    def _setattr(self, args):
        obj, name = args[0], _text(args[1]) if len(args) > 1 else None
        if self.function_writes is not None and _type(obj) is FunctionType:
            self.function_writes.append(name)
        if name == "__code__":
            self._untrusted_caller("replacing a function's code")
        elif name in ("__defaults__", "__kwdefaults__") and _type(obj) is FunctionType:
            code = obj.__code__
            if self.trust.of_code(code) != Trust.UNTRUSTED:
                self._untrusted_caller(f"changing {name} of a function it does not own")

    def _open(self, args):
        path = self._path(args[0])
        if path is None:
            return
        resolved = _realpath(path)
        if self.guards:
            parts = resolved.split("/")
            if len(parts) >= 4 and parts[1] == "proc" and parts[3] in ("mem", "maps", "environ"):
                self._untrusted_caller(f"reading {resolved}")
            mode = args[1] if len(args) > 1 else "r"
            text_mode = _text(mode) if _kind(mode, _str) else None
            flags = args[2] if len(args) > 2 else 0
            flags = _int.__int__(flags) if _kind(flags, _int) else 0  # an exact copy
            writing = (text_mode is not None and any(c in text_mode for c in "wax+")) or (
                (mode is None or text_mode is not None) and flags & _O_WRITING
            )
            if writing and resolved in self.hashes:
                self._untrusted_caller(f"writing the test file {resolved}")
        self._hidden(resolved, path, "open")

    def _hidden(self, resolved, path, event):
        named = resolved in self.hidden or (
            not _lexists(resolved) and path.rsplit("/", 1)[-1] in self.hidden_names
        )
        if named:
            who = self.trust.culprit(self.frame)
            if who is not None:
                self.hidden_reads.append(f"{event} by {who}")
                self.refuse("reading a hidden test file", who)

    def _paths(self, args):
        for arg in args[:2]:
            path = self._path(arg)
            if path is not None:
                resolved = _realpath(path)
                if resolved in self.hashes:
                    self._untrusted_caller(f"moving or removing the test file {resolved}")
                self._hidden(resolved, path, "a link or rename")

    def _process(self, args):
        text = " ".join(_words(args[:3]))
        if any(name in text for name in self.telling):
            who = self.trust.culprit(self.frame)
            if who is not None:
                self.hidden_reads.append(f"a process by {who}")
                self.refuse("a process naming a hidden test file", who)

    HANDLERS = {
        "gc.get_objects": _gc,
        "gc.get_referrers": _gc,
        "gc.get_referents": _gc,
        "sys._current_frames": _frames,
        "sys.settrace": _trace,
        "sys.setprofile": _trace,
        "code.__new__": _code_new,
        "marshal.loads": _marshal,
        "marshal.load": _marshal,
        "compile": _compile,
        "import": _import,
        "sys._getframe": _getframe_event,
        "object.__getattr__": _getattr,
        "object.__setattr__": _setattr,
        "open": _open,
        "os.link": _paths,
        "os.symlink": _paths,
        "os.rename": _paths,
        "os.remove": _paths,
        "os.rmdir": _paths,
        "os.truncate": _paths,
        "os.chmod": _paths,
        "shutil.copyfile": _paths,
        "shutil.move": _paths,
        **dict.fromkeys(PROCESS_EVENTS, _process),
    }
