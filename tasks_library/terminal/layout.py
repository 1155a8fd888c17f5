"""Terminal tasks as directories: Harbor's layout, read and written, and Terminal-Bench's older
one, read.

Harbor's task directory (https://harborframework.com/docs/tasks), which Crucible keeps byte for
byte::

    instruction.md          what the agent is asked
    task.toml               [metadata], [verifier] timeout_sec, [agent] timeout_sec,
                            [environment] cpus, memory_mb, storage_mb, build_timeout_sec...
    environment/Dockerfile  the machine (the subset of tasks_library/terminal/dockerfile.py),
    environment/...         and its build context
    tests/test.sh           the verifier: run on the final state, it writes a reward
    tests/...               (/logs/verifier/reward.txt, binary or fractional) and its files
    solution/solve.sh       the reference solution (optional)

Terminal-Bench's layout (``task.yaml`` with the instruction and ``max_agent_timeout_sec`` /
``max_test_timeout_sec``, ``Dockerfile`` and its context at the top, ``solution.sh`` or
``solution.yaml``, ``run-tests.sh``, ``tests/``, ``docker-compose.yaml``) is read into Harbor's,
as Harbor's own migration maps it: the instruction to ``instruction.md``; the timeouts to
``[agent]`` and ``[verifier]``, the directory's name to ``[task] name`` and the other keys
to ``[metadata]``; the Dockerfile and its
context to ``environment/``; ``run-tests.sh`` into ``tests/`` beside a ``test.sh`` that runs it
with ``TEST_DIR=/tests`` and writes reward 1 when it exits 0, else 0 (Terminal-Bench's pytest
parser passes a task when every test passed, and ``run-tests.sh`` exits with pytest's status).
A one-service ``docker-compose.yaml`` is Terminal-Bench's own scaffolding and is left out;
more services than one are refused (a terminal task's services start inside its one root).

A task's identity is :meth:`TerminalTask.content_hash`: the sha256 of every file of its Harbor
layout, by path. :func:`write_harbor` writes those bytes back, so a round trip keeps the hash.
Every directory is hostile input: links are not followed, special files and names that are not
UTF-8 or hold control characters are refused, and sizes are capped.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import stat
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import tomli_w
import yaml

from core.errors import InputError
from core.names import name_problem, printable
from tasks_library.hashing import content_hash
from tasks_library.terminal import dockerfile

MAX_FILES = 2000  # files and directories
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_TOTAL_BYTES = 100 * 1024 * 1024
MAX_DEPTH = 32
# task.yaml's keys kept in task.toml's [metadata]: values of TOML's types, this many in all
MAX_METADATA_VALUES = 1000
MAX_METADATA_DEPTH = 8
REQUIRED = ("instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh")
# Terminal-Bench's files that are not the build context
TB_CONTROL = {
    "task.yaml",
    "solution.sh",
    "solution.yaml",
    "run-tests.sh",
    "docker-compose.yaml",
    "docker-compose.yml",
}
NOT_TOML = "task.toml is not TOML ({exc})"
IN_CONTEXT = "environment/{exc}"  # "environment/Dockerfile line N: ..."
# task.yaml's timeouts -> task.toml's sections
TB_TIMEOUTS = {"max_test_timeout_sec": "verifier", "max_agent_timeout_sec": "agent"}
TB_TEST_SH = """#!/bin/bash
# Terminal-Bench's run-tests.sh (beside this file), its outcome written as Harbor's reward: 1 when
# it exits 0 (every test passed), else 0. Written by Crucible's Terminal-Bench import.
export TEST_DIR=/tests
mkdir -p /logs/verifier
if bash /tests/run-tests.sh; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


class TerminalTaskError(InputError):
    """A task directory that cannot be read as a terminal task.

    ``field`` is the file at fault, relative to the task directory (``task.toml``,
    ``environment/Dockerfile``...), or None for the directory as a whole.
    """

    def __init__(self, where: Path | str, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{where}: {message}", field=field)


@dataclass(frozen=True)
class TerminalTask:
    """A terminal task: the files of its Harbor layout, ``{path: bytes}`` (paths relative to
    the task directory, ``/``-separated), and the name of the directory it was read from.

    Build one with :func:`read_task`, :func:`read_harbor` or :func:`read_terminal_bench`,
    which check it; the properties below read the checked files.
    """

    files: dict[str, bytes]
    directory_name: str

    @property
    def name(self) -> str:
        """``[task] name`` of task.toml where it has one (Terminal-Bench's import writes it),
        else the directory's name."""
        table = self.config.get("task")
        name = table.get("name") if isinstance(table, dict) else None
        return name if isinstance(name, str) and name.strip() else self.directory_name

    @property
    def instruction(self) -> str:
        return self.files["instruction.md"].decode("utf-8")

    @cached_property
    def config(self) -> dict:
        """``task.toml``, parsed."""
        return tomllib.loads(self.files["task.toml"].decode("utf-8"))

    @cached_property
    def recipe(self) -> dockerfile.EnvironmentRecipe:
        """The environment its Dockerfile asks for."""
        return dockerfile.parse(self.files["environment/Dockerfile"].decode("utf-8"))

    def part(self, directory: str) -> dict[str, bytes]:
        """The files under ``directory`` (``environment``, ``tests``, ``solution``), by path
        relative to it."""
        prefix = directory.rstrip("/") + "/"
        return {p[len(prefix) :]: b for p, b in self.files.items() if p.startswith(prefix)}

    def timeout_s(self, section: str, default: float) -> float:
        """``[section].timeout_sec`` (``agent`` or ``verifier``), in seconds (checked to be a
        table and a number above 0 when the task was read)."""
        return float(self.config.get(section, {}).get("timeout_sec", default))

    def content(self) -> dict:
        """``{"files": {path: sha256 hex}}``: what :meth:`content_hash` hashes. The name is not
        in it: a task's name is ``[task].name`` in task.toml where it has one (a file like the
        others), else its directory's name, which a copy may change."""
        return {
            "files": {path: hashlib.sha256(data).hexdigest() for path, data in self.files.items()}
        }

    def content_hash(self) -> str:
        """SHA-256 of :meth:`content` (canonical JSON): equal for equal bytes, whatever layout
        the task was read from."""
        return content_hash(self.content())


def read_task(directory: Path) -> TerminalTask:
    """Read ``directory`` in whichever layout it has: ``task.toml`` (Harbor) or ``task.yaml``
    (Terminal-Bench).

    Raises:
        TerminalTaskError: neither file is there, or the layout's reader refuses it.
    """
    directory = Path(directory)
    if (directory / "task.toml").is_file():
        return read_harbor(directory)
    if (directory / "task.yaml").is_file():
        return read_terminal_bench(directory)
    raise TerminalTaskError(
        directory, "no task.toml (Harbor's layout) or task.yaml (Terminal-Bench's) in it"
    )


def read_harbor(directory: Path) -> TerminalTask:
    """Read a Harbor task directory.

    Raises:
        TerminalTaskError: a required file missing (instruction.md, task.toml,
            environment/Dockerfile, tests/test.sh), task.toml that is not TOML or has a bad
            timeout, a Dockerfile outside the subset (naming its line), a file that is a link
            or special, a name that is not UTF-8, or a size over the caps.
    """
    directory = Path(directory)
    files = _read_tree(directory)
    return _checked(directory, files)


def read_terminal_bench(directory: Path) -> TerminalTask:
    """Read a Terminal-Bench task directory into Harbor's layout (module docstring).

    Raises:
        TerminalTaskError: no task.yaml or an unreadable one, no instruction in it, no
            Dockerfile or run-tests.sh, a docker-compose.yaml with several services, a
            solution.yaml that is not a list of commands, and what :func:`read_harbor` refuses.
    """
    directory = Path(directory)
    tree = _read_tree(directory)
    where = directory / "task.yaml"
    meta = _yaml(directory, "task.yaml", tree.get("task.yaml", b""))
    if not isinstance(meta, dict):
        raise TerminalTaskError(where, "not a mapping of keys", field="task.yaml")
    instruction = _tb_instruction(meta)
    if not instruction:
        raise TerminalTaskError(where, "no 'instruction' in it", field="task.yaml")
    for required in ("Dockerfile", "run-tests.sh"):
        if required not in tree:
            raise TerminalTaskError(directory, f"no {required} in it", field=required)
    for generated in ("tests/test.sh", "tests/run-tests.sh"):  # the import writes these two
        if generated in tree:
            raise TerminalTaskError(
                directory,
                f"{generated} is where the import puts Harbor's verifier; rename it",
                field=generated,
            )
    _tb_compose(directory, tree)
    files = {
        "instruction.md": instruction.encode("utf-8"),
        "task.toml": tomli_w.dumps(_tb_config(directory, directory.name, meta)).encode("utf-8"),
        "tests/test.sh": TB_TEST_SH.encode("utf-8"),
        "tests/run-tests.sh": tree["run-tests.sh"],
    }
    solution = _tb_solution(directory, tree)
    if solution is not None:
        files["solution/solve.sh"] = solution
    for path, data in tree.items():
        if path.startswith("tests/"):
            files[path] = data
        elif path not in TB_CONTROL:
            files["environment/" + path] = data
    return _checked(directory, dict(sorted(files.items())))


def write_harbor(task: TerminalTask, directory: Path) -> Path:
    """Write ``task`` as a Harbor task directory (``directory``, created; it must not exist or
    be empty). Shell scripts (``*.sh``) are made executable. Returns ``directory``.

    Raises:
        TerminalTaskError: ``directory`` exists and holds files, or a path of ``task.files`` is
            absolute or has an empty, ``.`` or ``..`` part.
    """
    directory = Path(directory)
    for path in task.files:  # a task built by hand may name anything
        parts = path.split("/")
        if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise TerminalTaskError(directory, f"{printable(path)} leaves the task's directory")
    if directory.exists() and any(directory.iterdir()):
        raise TerminalTaskError(directory, "it is not empty; name a new directory")
    for path, data in task.files.items():
        target = directory.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if path.endswith(".sh") else 0o644)
    return directory


def _read_tree(directory: Path) -> dict[str, bytes]:
    """Every regular file under ``directory``, ``{relative path: bytes}``, sorted by path.

    Walked without recursion and without following a link: each file is opened with
    ``O_NOFOLLOW`` (a file swapped for a link after the listing is refused, not followed) and
    ``O_NONBLOCK`` (a FIFO does not block the open), then checked on its descriptor.
    """
    if not directory.is_dir():
        raise TerminalTaskError(directory, "not a directory")
    files: dict[str, bytes] = {}
    entries = total = 0
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        if rel_dir.count("/") >= MAX_DEPTH:
            raise TerminalTaskError(directory, f"{rel_dir} is over {MAX_DEPTH} directories deep")
        with os.scandir(directory / rel_dir if rel_dir else directory) as listing:
            children = sorted(listing, key=lambda entry: entry.name)
        for entry in children:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            problem = name_problem(rel)
            if problem:
                raise TerminalTaskError(directory, f"the file name {printable(rel)} {problem}")
            entries += 1
            if entries > MAX_FILES:
                raise TerminalTaskError(directory, f"over {MAX_FILES} files and directories")
            if entry.is_dir(follow_symlinks=False):
                pending.append(rel)
                continue
            data = _read_file(directory, rel, Path(entry.path), MAX_TOTAL_BYTES - total)
            total += len(data)
            files[rel] = data
    return dict(sorted(files.items()))


def _read_file(directory: Path, rel: str, path: Path, room: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``MAX_FILE_BYTES`` and ``room``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        kind = "a link" if path.is_symlink() else f"not readable ({exc.strerror})"
        raise TerminalTaskError(
            directory, f"{rel} is {kind}; a task holds regular files only", field=rel
        ) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise TerminalTaskError(
                directory,
                f"{rel} is not a regular file; a task holds regular files only",
                field=rel,
            )
        limit = min(MAX_FILE_BYTES, room)
        data = handle.read(limit + 1)
    if len(data) > limit:
        cap = (
            f"{MAX_FILE_BYTES} bytes a file"
            if limit == MAX_FILE_BYTES
            else f"{MAX_TOTAL_BYTES} bytes in all"
        )
        raise TerminalTaskError(directory, f"{rel} takes the task over {cap}", field=rel)
    return data


def _checked(directory: Path, files: dict[str, bytes]) -> TerminalTask:
    for required in REQUIRED:
        if required not in files:
            raise TerminalTaskError(directory, f"no {required} in it", field=required)
    task = TerminalTask(files=files, directory_name=directory.name)
    for path in ("instruction.md", "task.toml", "environment/Dockerfile"):
        try:
            files[path].decode("utf-8")
        except UnicodeDecodeError:
            raise TerminalTaskError(directory, f"{path} is not UTF-8 text", field=path) from None
    config = _parsed(directory, "task.toml", lambda: task.config, tomllib.TOMLDecodeError, NOT_TOML)
    problem = name_problem(task.name)
    if problem or not task.name.strip():
        raise TerminalTaskError(
            directory,
            f"the task's name {printable(task.name)} {problem or 'is empty'}",
            field="task.toml",
        )
    for section in ("agent", "verifier"):
        table = config.get(section, {})
        if not isinstance(table, dict):
            raise TerminalTaskError(
                directory,
                f"task.toml {section} = {table!r}: write a [{section}] table",
                field="task.toml",
            )
        value = table.get("timeout_sec", 1.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise TerminalTaskError(
                directory,
                f"task.toml [{section}] timeout_sec = {value!r}: write a number of seconds above 0",
                field="task.toml",
            )
    if not task.instruction.strip():
        raise TerminalTaskError(directory, "instruction.md is empty", field="instruction.md")
    recipe = _parsed(
        directory,
        "environment/Dockerfile",
        lambda: task.recipe,
        dockerfile.DockerfileError,
        IN_CONTEXT,
    )
    context = task.part("environment")
    for source, _dest in recipe.copies:
        if source != "." and not any(p == source or p.startswith(source + "/") for p in context):
            raise TerminalTaskError(
                directory,
                f"environment/Dockerfile copies {source}, which is not in environment/",
                field="environment/Dockerfile",
            )
    return task


def _parsed(directory: Path, path: str, read, errors, says: str):
    """``read()``, or a :class:`TerminalTaskError` on file ``path`` when it raises ``errors``,
    its message ``says`` with the parser's own (which names the line) for ``{exc}``."""
    try:
        return read()
    except errors as exc:
        raise TerminalTaskError(directory, says.format(exc=exc), field=path) from None


def _yaml(directory: Path, path: str, data: bytes):
    """``data`` (the file ``path``) parsed with YAML's safe loader (aliases are not expanded
    here: :func:`_toml_value` counts them).

    Raises:
        TerminalTaskError: not UTF-8, not YAML, or nested deeper than the parser's recursion.
    """
    try:
        return yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise TerminalTaskError(directory, f"{path} is not YAML ({why})", field=path) from None


def _tb_instruction(meta: dict) -> str:
    instruction = meta.get("instruction")
    if isinstance(instruction, str):
        return instruction
    for entry in meta.get("descriptions") or []:  # the first releases' shape
        if isinstance(entry, dict) and entry.get("key") == "base":
            return str(entry.get("description") or "")
    return ""


def _tb_config(directory: Path, name: str, meta: dict) -> dict:
    """task.toml's content from task.yaml's keys (and the task's name: its directory's).

    Raises:
        TerminalTaskError: a timeout that is not a number of seconds above 0, or metadata that
            TOML cannot hold (a null in a list, binary, a set, keys that are not strings) or that
            is over ``MAX_METADATA_VALUES`` values (YAML's aliases count each time they are used,
            so an alias bomb is refused, not expanded) or ``MAX_METADATA_DEPTH`` levels.
    """
    config: dict = {"version": "1.0", "task": {"name": name}}
    budget = [MAX_METADATA_VALUES]
    metadata = {
        str(key): _toml_value(directory, str(key), value, budget, 0)
        for key, value in meta.items()
        if key not in ("instruction", "descriptions", *TB_TIMEOUTS) and value is not None
    }
    if metadata:
        config["metadata"] = metadata
    for key, section in TB_TIMEOUTS.items():
        value = meta.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise TerminalTaskError(
                directory,
                f"task.yaml {key}: {value!r}; write a number of seconds above 0",
                field="task.yaml",
            )
        config[section] = {"timeout_sec": float(value)}
    return config


def _toml_value(directory: Path, key: str, value, budget: list[int], depth: int):
    """``value`` (task.yaml's, under ``key``) as TOML can hold it, checked (see
    :func:`_tb_config`)."""

    def refuse(why: str) -> TerminalTaskError:
        return TerminalTaskError(directory, f"task.yaml {key}: {why}", field="task.yaml")

    budget[0] -= 1
    if budget[0] < 0:
        raise refuse(f"over {MAX_METADATA_VALUES} values in task.yaml's keys")
    if depth > MAX_METADATA_DEPTH:
        raise refuse(f"nested over {MAX_METADATA_DEPTH} levels")
    if isinstance(value, str | bool | int | float | datetime.date | datetime.datetime):
        return value
    if isinstance(value, list):
        if any(item is None for item in value):
            raise refuse("a list holds a null, which TOML cannot write")
        return [_toml_value(directory, key, item, budget, depth + 1) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise refuse("a mapping's keys must be strings")
        return {
            k: _toml_value(directory, f"{key}.{k}", v, budget, depth + 1)
            for k, v in value.items()
            if v is not None
        }
    raise refuse(f"a {type(value).__name__} value, which TOML cannot write")


def _tb_compose(directory: Path, tree: dict[str, bytes]) -> None:
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        if name not in tree:
            continue
        compose = _yaml(directory, name, tree[name]) or {}
        services = compose.get("services") if isinstance(compose, dict) else None
        if isinstance(services, dict) and len(services) > 1:
            raise TerminalTaskError(
                directory,
                f"{name} has {len(services)} services ({', '.join(sorted(services))}); a "
                "terminal task is one root: start its services inside it (task setup)",
                field=name,
            )


def _tb_solution(directory: Path, tree: dict[str, bytes]) -> bytes | None:
    if "solution.sh" in tree:
        return tree["solution.sh"]
    if "solution.yaml" not in tree:
        return None
    steps = _yaml(directory, "solution.yaml", tree["solution.yaml"])
    if not isinstance(steps, list) or not all(
        isinstance(s, dict) and isinstance(s.get("command"), str) for s in steps
    ):
        raise TerminalTaskError(
            directory, "solution.yaml is not a list of {command: ...}", field="solution.yaml"
        )
    lines = ["#!/bin/bash", "# Terminal-Bench's solution.yaml, its commands in order."]
    lines += [step["command"].rstrip("\n") for step in steps]
    return ("\n".join(lines) + "\n").encode("utf-8")
