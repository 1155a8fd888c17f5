"""The common subset of a task's Dockerfile, read as a Crucible environment recipe.

Harbor and Terminal-Bench tasks describe their machine with a Dockerfile. Crucible builds no
images: a terminal task's environment is a runtime (the host's Python or a Debian root,
``sandboxes/environments``), Debian packages installed into that root, pinned Python packages,
and a file tree. The instructions that say exactly that are read; anything else (a ``RUN`` of
any other command, ``ADD``, ``USER``, ``ARG``, ``CMD``...) would need a container build to mean
anything, and is refused with its line number, so that no task is imported with a part of its
setup silently dropped.

Read (Dockerfile reference: https://docs.docker.com/reference/dockerfile/):

- ``FROM`` a Debian, Ubuntu or python image (``debian:trixie-slim``, ``ubuntu:24.04``,
  ``python:3.13-slim``, Terminal-Bench's ``ghcr.io/laude-institute/t-bench/python-3-13:TAG``
  and ``.../ubuntu-24-04:TAG``), one stage;
- ``RUN`` made of ``&&``-joined steps, each one of: ``apt-get update``, ``apt-get install
  [-y] [--no-install-recommends] PKG...`` (``PKG`` or ``PKG=VERSION``), ``apt-get clean``,
  ``rm -rf /var/lib/apt/lists/*``, ``pip install [--no-cache-dir] NAME==VERSION...`` (also
  ``pip3`` and ``python -m pip``), ``mkdir -p DIR...``;
- ``COPY SRC... DEST`` from the build context (no ``--from``, ``--chown`` or wildcards);
- ``WORKDIR``, ``ENV``; comments, blank lines and ``\\`` continuations.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

# image (without its tag) -> (the runtime it maps to, the base it was)
PYTHON_IMAGE = re.compile(r"^(?:docker\.io/)?(?:library/)?python:(3\.\d+)(?:[.\w-]*)$")
DEBIAN_IMAGE = re.compile(r"^(?:docker\.io/)?(?:library/)?(debian|ubuntu)(?::[\w.-]+)?$")
TBENCH_IMAGE = re.compile(
    r"^ghcr\.io/laude-institute/t-bench/(python-3-(\d+)|ubuntu-[\d-]+)(?::[\w.-]+)?$"
)
# A Debian root's Python: what a Debian or Ubuntu base runs (sandboxes/environments/debian.py).
DEBIAN_RUNTIME = "python3.13"
APT_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[\w.:~+-]+)?$")
PIP_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[\w,.-]+\])?==[\w.!+-]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
APT_FLAGS = {"-y", "--yes", "-q", "-qq", "-yq", "-qy", "--no-install-recommends", "--quiet"}
PIP_FLAGS = {"--no-cache-dir", "-q", "--quiet", "--break-system-packages", "--upgrade", "-U"}
APT_LISTS_CLEANUP = (["rm", "-rf", "/var/lib/apt/lists/*"], ["rm", "-rf", "/var/lib/apt/lists"])


class DockerfileError(ValueError):
    """A Dockerfile outside the subset Crucible reads.

    Attributes:
        line: the 1-based line the instruction starts on (0: the file as a whole).
    """

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"Dockerfile line {line}: {message}" if line else f"Dockerfile: {message}")
        self.line = line


@dataclass
class EnvironmentRecipe:
    """What a Dockerfile asks for, as Crucible builds it.

    Attributes:
        base: the ``FROM`` image as written.
        runtime: the Crucible runtime it maps to (``python3.11``, ``python3.13``...).
        debian_packages: ``apt-get install``'s packages, in order (``NAME`` or
            ``NAME=VERSION``).
        python_packages: ``pip install``'s pins (``NAME==VERSION``), in order.
        copies: ``(source in the build context, destination path in the root)`` per ``COPY``
            source; a destination ending in ``/`` is a directory.
        directories: the absolute directories ``mkdir -p`` makes.
        workdir: the last ``WORKDIR`` (absolute; the agent's working directory), ``/`` if none.
        env: ``ENV``'s variables.
    """

    base: str
    runtime: str
    debian_packages: list[str] = field(default_factory=list)
    python_packages: list[str] = field(default_factory=list)
    copies: list[tuple[str, str]] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The recipe as JSON (what a task version stores)."""
        return {
            "base": self.base,
            "runtime": self.runtime,
            "debian_packages": list(self.debian_packages),
            "python_packages": list(self.python_packages),
            "copies": [list(pair) for pair in self.copies],
            "directories": list(self.directories),
            "workdir": self.workdir,
            "env": dict(self.env),
        }


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, instruction)`` per instruction: continuations joined, comments and
    blank lines dropped (a comment inside a continued instruction too, as Docker does)."""
    out, pending, start = [], [], 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        out.append((start, " ".join(part for part in pending if part).strip()))
        pending = []
    if pending:
        out.append((start, " ".join(pending).strip()))
    return out


def runtime_of(image: str) -> str | None:
    """The Crucible runtime of a ``FROM`` image, or None outside the subset."""
    if match := PYTHON_IMAGE.match(image):
        return f"python{match.group(1)}"
    if DEBIAN_IMAGE.match(image):
        return DEBIAN_RUNTIME
    if match := TBENCH_IMAGE.match(image):
        return f"python3.{match.group(2)}" if match.group(2) else DEBIAN_RUNTIME
    return None


def parse(text: str) -> EnvironmentRecipe:
    """Read ``text`` (a Dockerfile) as an :class:`EnvironmentRecipe`.

    Raises:
        DockerfileError: an instruction outside the subset (module docstring), a second
            ``FROM``, no ``FROM`` first, an unpinned pip package or a malformed line; the
            message names the line and what to write instead.
    """
    lines = logical_lines(text)
    if not lines:
        raise DockerfileError(0, "it is empty; it needs a FROM line")
    recipe: EnvironmentRecipe | None = None
    for number, line in lines:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if recipe is None:
            if keyword != "FROM":
                raise DockerfileError(number, f"{keyword} before FROM; the first one is FROM")
            recipe = _from(number, rest)
            continue
        if keyword == "FROM":
            raise DockerfileError(number, "a second FROM: multi-stage builds are not read")
        if keyword == "RUN":
            _run(number, rest, recipe)
        elif keyword == "COPY":
            _copy(number, rest, recipe)
        elif keyword == "WORKDIR":
            recipe.workdir = _absolute(number, rest, recipe.workdir)
        elif keyword == "ENV":
            recipe.env.update(_env(number, rest))
        else:
            raise DockerfileError(
                number,
                f"{keyword} is outside the subset Crucible reads (FROM, RUN apt-get install or "
                "pip install, COPY, WORKDIR, ENV); a terminal task's setup is its files, "
                "packages and environment variables",
            )
    return recipe


def _from(number: int, rest: str) -> EnvironmentRecipe:
    words = rest.split()
    named = len(words) == 3 and words[1].upper() == "AS"  # FROM IMAGE AS NAME
    if not words or words[0].startswith("--") or not (len(words) == 1 or named):
        raise DockerfileError(number, f"FROM {rest!r}: write FROM IMAGE")
    image = words[0]
    runtime = runtime_of(image)
    if runtime is None:
        raise DockerfileError(
            number,
            f"FROM {image}: the base must be a Debian, Ubuntu or python image "
            "(debian:trixie-slim, ubuntu:24.04, python:3.13-slim)",
        )
    return EnvironmentRecipe(base=image, runtime=runtime)


def _run(number: int, rest: str, recipe: EnvironmentRecipe) -> None:
    if rest.startswith("["):
        raise DockerfileError(number, "RUN in exec form (JSON) is not read; write the shell form")
    # Operators are words of their own ("a&&b" is three); a pipe or a redirection is a word
    # no step accepts.
    lexer = shlex.shlex(rest, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError as exc:
        raise DockerfileError(number, f"RUN cannot be split into words ({exc})") from None
    steps, step = [], []
    for word in words:
        if word in ("&&", ";"):
            steps.append(step)
            step = []
        else:
            step.append(word)
    steps.append(step)
    for step in steps:
        _step(number, step, recipe)


def _step(number: int, step: list[str], recipe: EnvironmentRecipe) -> None:
    shown = " ".join(step) or "(empty)"
    if step in (["apt-get", "update"], ["apt-get", "clean"], ["apt", "update"]):
        return
    if step in APT_LISTS_CLEANUP:
        return
    if step[:2] in (["apt-get", "install"], ["apt", "install"]):
        refusal = "is not a Debian package name (NAME or NAME=VERSION)"
        _install(number, shown, step[2:], APT_FLAGS, APT_NAME, refusal, recipe.debian_packages)
        return
    pip = _pip_args(step)
    if pip is not None:
        refusal = "is not pinned; write NAME==VERSION (an environment is the same on every replay)"
        _install(number, shown, pip, PIP_FLAGS, PIP_PIN, refusal, recipe.python_packages)
        return
    if step[:2] == ["mkdir", "-p"] and len(step) > 2:
        for path in step[2:]:
            directory = _absolute(number, path, recipe.workdir)
            if directory not in recipe.directories:
                recipe.directories.append(directory)
        return
    raise DockerfileError(
        number,
        f"RUN {shown}: only apt-get install, pip install NAME==VERSION and mkdir -p are read; "
        "put what else the task needs in its files",
    )


def _install(
    number: int,
    shown: str,
    words: list[str],
    flags: set[str],
    name: re.Pattern,
    refusal: str,
    into: list[str],
) -> None:
    """Add an install step's packages (``words`` less its ``flags``) to ``into``, each once;
    refuse the step when one does not match ``name`` (an unknown flag does not) or none is
    named."""
    names = [w for w in words if w not in flags]
    bad = [w for w in names if w.startswith("-") or not name.match(w)]
    if bad or not names:
        raise DockerfileError(number, f"{shown}: {bad[0] if bad else 'no package'} {refusal}")
    into.extend(n for n in names if n not in into)


def _pip_args(step: list[str]) -> list[str] | None:
    if step[:2] in (["pip", "install"], ["pip3", "install"]):
        return step[2:]
    if len(step) > 3 and step[0] in ("python", "python3") and step[1:3] == ["-m", "pip"]:
        return step[4:] if step[3] == "install" else None
    return None


def _copy(number: int, rest: str, recipe: EnvironmentRecipe) -> None:
    words = rest.split()
    if rest.startswith("[") or any(w.startswith("--") for w in words):
        raise DockerfileError(number, f"COPY {rest}: write COPY SRC... DEST without flags")
    if len(words) < 2:
        raise DockerfileError(number, f"COPY {rest}: write COPY SRC... DEST")
    *sources, dest = words
    if len(sources) > 1 and not dest.endswith("/"):
        raise DockerfileError(number, f"COPY of {len(sources)} sources: DEST must end in /")
    target = _absolute(number, dest, recipe.workdir) + ("/" if dest.endswith("/") else "")
    for source in sources:
        if any(c in source for c in "*?[") or source.startswith("/") or ".." in source.split("/"):
            raise DockerfileError(
                number, f"COPY {source}: name a file or directory inside the build context"
            )
        recipe.copies.append((posixpath.normpath(source), target))


def _absolute(number: int, path: str, workdir: str) -> str:
    if not path or "$" in path:
        raise DockerfileError(number, f"{path!r}: write a literal path")
    joined = posixpath.normpath(posixpath.join(workdir, path))
    return joined if joined.startswith("/") else "/" + joined


def _env(number: int, rest: str) -> dict[str, str]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise DockerfileError(number, f"ENV cannot be split into words ({exc})") from None
    if words and "=" not in words[0]:  # the legacy form: ENV NAME VALUE...
        if len(words) < 2 or not ENV_NAME.match(words[0]):
            raise DockerfileError(number, f"ENV {rest}: write ENV NAME=VALUE")
        return {words[0]: " ".join(words[1:])}
    out = {}
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not ENV_NAME.match(name):
            raise DockerfileError(number, f"ENV {word}: write NAME=VALUE")
        out[name] = value
    return out
