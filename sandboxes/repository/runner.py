"""One pytest run of a repository grading in a fresh sandbox session: the workspace it runs on,
and the run itself (``harness/pytest_supervisor.py`` starting ``harness/pytest_repository.py``).

:func:`graded_tree` is pure: the submission's final files with the task's tests and
configuration restored, the hidden tests added, no bytecode, and no native module the task
version does not have. :func:`run_pytest` opens the session and returns the execution and
the supervisor's answer.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import secrets
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import result as R
from sandboxes.repository.paths import grading_files, pytest_config
from sandboxes.repository.report import read_answer
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.workspace import Workspace

HARNESS = Path(__file__).resolve().parent.parent / "harness"
SUPERVISOR = HARNESS / "pytest_supervisor.py"
# The pytest process's program, one source in this order (each part names the next's needs).
RUNNER_PARTS = ("grading_trust.py", "grading_guard.py", "grading_checks.py", "pytest_repository.py")
SITE_PACKAGES = "/env/site-packages"
ANSWER_CAP_BYTES = 7 * 1024**2  # under the session's 8 MiB output kill
MIB = 1024**2
# Bytecode is never read from a submission; native modules only where the task has them.
BYTECODE_SUFFIXES = (".pyc", ".pyo")
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")
# The boot reads a header line and the supervisor from stdin; nothing of it is a secret but
# the nonce, which only the supervisor process keeps.
BOOT = (
    "import sys\n"
    "def _boot():\n"
    "    data = sys.stdin.buffer.read()\n"
    "    cut = data.index(b'\\n')\n"
    "    import json\n"
    "    header = json.loads(data[:cut])\n"
    "    end = cut + 1 + header['supervisor']\n"
    "    scope = {'__name__': 'crucible_grading_supervisor'}\n"
    "    exec(compile(data[cut + 1:end], 'crucible-grading-supervisor', 'exec'), scope)\n"
    "    scope['main'](header['nonce'], data[end:])\n"
    "_boot()\n"
)


def grading_limits(timeout_s: float, *, writable_bytes: int = 128 * MIB) -> SessionLimits:
    """A grading session's limits: what a suite writes (its workspace and ``/tmp``:
    ``writable_bytes`` each, 16 MiB of ``/dev/shm``) rather than an agent's room, so that the
    gradings in flight stay within a worker's session budget; idle for its run and a minute."""
    return SessionLimits(
        idle_timeout_s=max(60.0, timeout_s + 60.0),
        workspace_bytes=writable_bytes,
        tmp_bytes=writable_bytes,
        shm_bytes=16 * MIB,
    )


@dataclass(frozen=True)
class GradedTree:
    """The workspace a grading runs on, and what the runner is told about it.

    Attributes:
        files: ``{path: content}`` of the graded workspace.
        hashes: SHA-256 of every test file and test configuration the grading put there
            (the runner compiles a test file only from exactly these bytes).
        unchanged: workspace files whose content is the task version's (code the submission
            did not write: trusted like the environment's).
        changed_lines: for each file of the task's the submission changed, the line numbers of
            its new text that the submission wrote (the rest of the file is the project's own).
        dropped: paths left out (bytecode, native modules the task does not have) or
            restored to the task's (a native module the submission changed).
    """

    files: dict[str, bytes]
    hashes: dict[str, str] = field(default_factory=dict)
    unchanged: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    changed_lines: dict = field(default_factory=dict)


def written_lines(before: bytes, after: bytes) -> list[int]:
    """The line numbers of ``after`` (from 1) that are not ``before``'s lines kept in order: what
    an edit wrote."""
    old = bytes(before).decode("utf-8", "replace").splitlines()
    new = bytes(after).decode("utf-8", "replace").splitlines()
    found = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            found.extend(range(j1 + 1, j2 + 1))
    return found


def _bytecode(path: str) -> bool:
    return "__pycache__" in path.split("/") or path.endswith(BYTECODE_SUFFIXES)


def _native(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(NATIVE_SUFFIXES) or ".so." in name


def graded_tree(
    files: Mapping[str, bytes],
    test_files: Mapping[str, bytes],
    hidden_files: Mapping[str, bytes],
    base: Mapping[str, bytes] | None = None,
) -> GradedTree:
    """The graded workspace (see :class:`GradedTree`): ``files`` with the tests reset
    (:func:`~sandboxes.repository.paths.grading_files`), no ``__pycache__``, ``.pyc`` or
    ``.pyo``, and native modules (``.so``, ``.pyd``) only as ``base`` (the task version's
    files) has them; without ``base``, every file is the submission's own (untrusted) and
    no native module is kept."""
    final = grading_files(files, test_files, hidden_files)
    base = base or {}
    dropped = []
    for path in list(final):
        if _bytecode(path):
            dropped.append(path)
            del final[path]
        elif _native(path) and final[path] != base.get(path):
            dropped.append(path)
            if path in base:
                final[path] = bytes(base[path])
            else:
                del final[path]
    trusted = {**test_files, **hidden_files}
    hashes = {p: hashlib.sha256(bytes(c)).hexdigest() for p, c in trusted.items()}
    unchanged = tuple(sorted(p for p, c in final.items() if p not in trusted and base.get(p) == c))
    changed_lines = {
        p: written_lines(base[p], c)
        for p, c in final.items()
        if p not in trusted and p in base and base[p] != c and p.endswith(".py")
    }
    return GradedTree(final, hashes, unchanged, tuple(sorted(dropped)), changed_lines)


def run_pytest(
    tree: GradedTree,
    test_files: Mapping[str, bytes],
    *,
    trusted: list[str],
    hidden: list[str] = (),
    args: list[str],
    ids: list[str] | None,
    environment: dict | None,
    timeout_s: float,
    runtime: str,
    slot: str | None,
    guards: bool = True,
) -> tuple[R.ExecutionResult, dict | None]:
    """One pytest run in a fresh session: the execution and the supervisor's answer (None when
    stdout did not end with a valid frame).

    Args:
        trusted: the task's test files (workspace-relative); hidden: those added at grading.
        args: pytest's arguments (options and paths); ids: the node ids to keep (None: all).
        guards: the first line's defences inside the pytest process (off only in tests of the
            second line).
    """
    from sandboxes.sessions.client import open_session  # noqa: PLC0415 (Redis on use only)

    config_path, config_content = pytest_config(test_files)
    workspace_files = dict(tree.files)
    workspace_files[config_path] = config_content
    workspace = Workspace.from_files(workspace_files)
    nonce = secrets.token_hex(16)
    config = {
        "import_mode_set": "import-mode"
        in " ".join(args) + config_content.decode("utf-8", "replace"),
        "ids": ids,
        "args": args,
        "config_file": config_path,
        "trusted": trusted,
        "hidden": list(hidden),
        "hashes": {**tree.hashes, config_path: hashlib.sha256(config_content).hexdigest()},
        "unchanged": list(tree.unchanged),
        "changed_lines": tree.changed_lines,
        "site": SITE_PACKAGES if environment and environment.get("packages") else "",
        "guards": guards,
    }
    supervisor = SUPERVISOR.read_bytes()
    header = json.dumps({"nonce": nonce, "supervisor": len(supervisor)}).encode()
    runner = b"\n".join((HARNESS / part).read_bytes() for part in RUNNER_PARTS)
    stdin = b"\n".join([header, supervisor + json.dumps(config).encode(), runner])
    limits = grading_limits(timeout_s)
    with open_session(
        workspace, limits=limits, runtime=runtime, slot=slot, environment=environment
    ) as session:
        execution = session.exec(
            f"exec python3 -I -B -c {shlex.quote(BOOT)}",
            stdin=stdin,
            timeout_s=timeout_s,
            output_cap_bytes=ANSWER_CAP_BYTES,
        )
    answer = read_answer(execution.stdout, nonce) if execution.status == R.OK else None
    return execution, answer
