"""A terminal task as it runs: its starting state, its state directories, its services, its
verifier and its environment, read from its Harbor files (:class:`TerminalSpec`).

The starting state is what the Dockerfile's ``COPY`` and ``mkdir -p`` put in place, at their
absolute paths, as Docker would (a file to a destination ending in ``/`` keeps its name inside
it; a directory's contents go into the destination; ``.`` is the whole build context). A copied
file whose content starts with ``#!`` is executable (Crucible keeps bytes, not modes). The
*state directories* are the working directory, each directory a copy lands in and each
``mkdir -p``: the session mounts them writable (``sandboxes.sessions.layout``); everything else
of the root is read-only.

Services are the commands of ``[metadata.crucible] services`` in task.toml (a key Harbor
leaves to the task): started in the agent's session when it opens, and again from the final
state before the verifier runs, since processes never outlive their session.

Paths Crucible mounts for grading (``/tests``, ``/logs``, ``/solution``, ``/crucible``) and the
sandbox's own (``/proc``, ``/tmp``...) cannot be state.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from sandboxes.sessions.layout import BOUND_FROM_ROOT as ROOT_OWNED
from sandboxes.sessions.layout import in_state_dirs
from tasks_library.terminal.layout import TerminalTask, TerminalTaskError

RESERVED = (
    "/tests",
    "/logs",
    "/solution",
    "/crucible",
    "/proc",
    "/dev",
    "/sys",
    "/tmp",
    "/workspace",
    "/env",
)
MAX_SERVICES = 8
DEFAULT_AGENT_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class TerminalSpec:
    """What a session, a grading and a validation need of a terminal task.

    Attributes:
        state: ``{path without the leading /: bytes}`` of the starting state.
        executable: the paths of ``state`` that are executable (``#!``).
        state_dirs: the absolute directories mounted writable, sorted.
        workdir: the agent's (and the verifier's) working directory.
        env: the Dockerfile's ``ENV`` variables.
        services: shell commands started in each session (agent and grading), in order.
        tests: ``{path: bytes}`` of ``tests/`` (the verifier; at ``/tests`` when grading).
        solution: ``{path: bytes}`` of ``solution/`` (at ``/solution`` when validating).
        agent_timeout_s, verifier_timeout_s: the task's time limits, seconds.
        runtime, python_packages, debian_packages: its environment.
    """

    state: dict[str, bytes]
    executable: frozenset[str]
    state_dirs: tuple[str, ...]
    workdir: str
    env: dict[str, str] = field(default_factory=dict)
    services: tuple[str, ...] = ()
    tests: dict[str, bytes] = field(default_factory=dict)
    solution: dict[str, bytes] = field(default_factory=dict)
    agent_timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    verifier_timeout_s: float = DEFAULT_VERIFIER_TIMEOUT_S
    runtime: str = ""
    python_packages: tuple[str, ...] = ()
    debian_packages: tuple[str, ...] = ()

    @property
    def system_state(self) -> frozenset[str]:
        """The state's files under the root's own directories (``etc/``, ``usr/``...): the only
        files there whose changes a grading keeps (see :func:`final_state`)."""
        return frozenset(p for p in self.state if p.split("/", 1)[0] in ROOT_OWNED)


def _is_reserved(path: str) -> bool:
    return path == "/" or any(path == r or path.startswith(r + "/") for r in RESERVED)


def terminal_spec(task: TerminalTask) -> TerminalSpec:
    """The :class:`TerminalSpec` of ``task`` (read and checked by ``tasks_library.terminal.
    layout``).

    Raises:
        TerminalTaskError: a working directory of ``/`` or a reserved place, a copy of a source
            the build context lacks or to a reserved place, or a bad ``services`` entry; the
            message names it.
    """
    recipe = task.recipe
    context = task.part("environment")
    where = task.directory_name
    workdir = recipe.workdir
    if _is_reserved(workdir):
        raise TerminalTaskError(
            where,
            f"environment/Dockerfile: WORKDIR {workdir} cannot hold the agent's files; give the "
            "task a working directory of its own (WORKDIR /app)",
            field="environment/Dockerfile",
        )
    state: dict[str, bytes] = {}
    dirs = {workdir}
    for source, dest in recipe.copies:
        copied = _copy(context, source, dest, where)
        if not copied:
            raise TerminalTaskError(
                where,
                f"environment/Dockerfile: COPY {source}: the build context (environment/) has "
                "no such file or directory",
                field="environment/Dockerfile",
            )
        for path in copied:
            if _is_reserved(path):
                raise TerminalTaskError(
                    where,
                    f"environment/Dockerfile: COPY {source} writes {path}, where Crucible mounts "
                    f"its own ({', '.join(RESERVED)})",
                    field="environment/Dockerfile",
                )
        state.update({p.lstrip("/"): data for p, data in copied.items()})
        dirs.update(posixpath.dirname(p) for p in copied)
    for directory in recipe.directories:
        if _is_reserved(directory):
            raise TerminalTaskError(
                where,
                f"environment/Dockerfile: mkdir -p {directory}: a place Crucible mounts",
                field="environment/Dockerfile",
            )
        dirs.add(directory)
    dirs.discard("/")
    return TerminalSpec(
        state=state,
        executable=frozenset(p for p, data in state.items() if data.startswith(b"#!")),
        state_dirs=tuple(sorted(dirs)),
        workdir=workdir,
        env=dict(recipe.env),
        services=_services(task),
        tests=task.part("tests"),
        solution=task.part("solution"),
        agent_timeout_s=task.timeout_s("agent", DEFAULT_AGENT_TIMEOUT_S),
        verifier_timeout_s=task.timeout_s("verifier", DEFAULT_VERIFIER_TIMEOUT_S),
        runtime=recipe.runtime,
        python_packages=tuple(recipe.python_packages),
        debian_packages=tuple(p for p in recipe.debian_packages),
    )


def _copy(context: dict[str, bytes], source: str, dest: str, where: str) -> dict[str, bytes]:
    """``{absolute path: bytes}`` that ``COPY source dest`` puts in place."""
    if source in (".", ""):
        inside = dict(context)
    elif source in context:  # a file
        name = posixpath.basename(source)
        target = posixpath.join(dest, name) if dest.endswith("/") else dest.rstrip("/")
        return {posixpath.normpath(target): context[source]}
    else:  # a directory: its contents
        prefix = source.rstrip("/") + "/"
        inside = {p[len(prefix) :]: b for p, b in context.items() if p.startswith(prefix)}
    base = dest.rstrip("/") or "/"
    return {posixpath.normpath(posixpath.join(base, rel)): data for rel, data in inside.items()}


def _services(task: TerminalTask) -> tuple[str, ...]:
    metadata = task.config.get("metadata", {})
    crucible = metadata.get("crucible", {}) if isinstance(metadata, dict) else {}
    services = crucible.get("services", []) if isinstance(crucible, dict) else []
    if (
        not isinstance(services, list)
        or len(services) > MAX_SERVICES
        or not all(
            isinstance(s, str) and s.strip() and len(s) <= 2000 and "\0" not in s for s in services
        )
    ):
        raise TerminalTaskError(
            task.directory_name,
            f"task.toml [metadata.crucible] services must be a list of at most {MAX_SERVICES} "
            "shell commands",
            field="task.toml",
        )
    return tuple(s.strip() for s in services)


def final_state(spec: TerminalSpec, changes) -> dict[str, bytes]:
    """The state a grading starts from: the task's starting state with the session's
    ``changes`` (``sandboxes.sessions.WorkspaceChanges``, paths without the leading ``/``)
    applied where :func:`kept` keeps them: inside the task's state directories only (nothing the
    agent wrote elsewhere in its workspace reaches the grading: a ``tests/conftest.py`` would be
    mounted at ``/tests``), and under the root's own directories (``/etc``, ``/usr``...) only the
    agent's version of the task's own files: a file the agent added there, or a file of the root
    it changed, never reaches the verifier's machine (an ``ld.so.preload``, a
    ``sitecustomize.py``, a ``python3`` ahead on the PATH would run inside the verifier).

    Returns:
        ``{path: bytes}``; the executable paths are those of :func:`executable_paths`.
    """
    owned = spec.system_state
    files = dict(spec.state)
    for path, data in changes.files.items():
        if kept(spec, path, owned):
            files[path] = data
    for path in changes.deleted:
        if kept(spec, path, owned):
            files.pop(path, None)
    return files


def kept(spec: TerminalSpec, path: str, owned: frozenset[str]) -> bool:
    """Whether a grading keeps the agent's change to ``path`` (without the leading ``/``): it
    lies in one of the task's state directories (the session's workspace holds more, such as a
    ``tests/`` or ``logs/`` the agent wrote at its top, which must never reach ``/tests`` or
    ``/logs``), and, under the root's own directories, is one of the task's own files."""
    if not in_state_dirs(path, spec.state_dirs):
        return False
    return path.split("/", 1)[0] not in ROOT_OWNED or path in owned


def executable_paths(spec: TerminalSpec, changes, files: dict[str, bytes]) -> set[str]:
    """The paths of ``files`` (a :func:`final_state`) that are executable: the task's own
    executables the agent left alone, and what the session made executable."""
    changed = set(changes.files)
    made = set(changes.executable)
    return {p for p in files if (p in made) or (p not in changed and p in spec.executable)}
