"""The agent's tools, each a JSON schema the policy sees and a call run in its sandbox session.

The schemas hold only what the policy may choose. The session, the timeout cap and the
output budget come from the :class:`ToolContext` the environment fills in; they are never
in a schema (verifiers learned this: a model that can name a session can reach another's).

Every call ends in a :class:`ToolResult`: a refused call (unknown tool, arguments that do not
match the schema, a path outside the workspace, a file that is not there) is an error
observation the policy can learn from, never an exception. The one exception that escapes
is :class:`sandboxes.sessions.SessionLost`: the session died through no fault of the
policy, and the trajectory is dropped, not scored.
"""

from __future__ import annotations

import posixpath
import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import jsonschema

from sandboxes import result as R
from sandboxes.sessions import Session, SessionError, SessionFileNotFound, SessionLost
from training.agents.parsers import ToolCall
from training.agents.trajectory import ToolRecord


@dataclass(frozen=True)
class ToolLimits:
    """What the environment allows a call, never shown to the policy.

    Attributes:
        max_timeout_s: the most wall seconds one command may run (a larger ``timeout`` is
            cut to it).
        default_timeout_s: a command's timeout when the policy gives none.
        output_chars: the most characters of one tool output the policy is shown; the rest
            is cut with a marker that says how much.
        file_bytes: the largest file the editor reads or writes.
    """

    max_timeout_s: float = 30.0
    default_timeout_s: float = 10.0
    output_chars: int = 4000
    file_bytes: int = 256 * 1024


@dataclass
class ToolContext:
    """What a tool call runs against: filled in by the environment.

    Attributes:
        session: the trajectory's sandbox session.
        limits: the :class:`ToolLimits`.
        run_visible_tests: runs the task's visible tests on the current workspace and says
            what happened (the environment's; ``run_tests`` calls it).
        history: the file editor's undo stack per path (the content before each edit; None
            where the file did not exist).
        cwd: where commands run: ``.`` (the workspace), or a terminal task's working
            directory (absolute).
    """

    session: Session
    limits: ToolLimits = field(default_factory=ToolLimits)
    run_visible_tests: Callable[[], ToolResult] | None = None
    history: dict[str, list[bytes | None]] = field(default_factory=dict)
    cwd: str = "."


@dataclass(frozen=True)
class ToolResult:
    """A call's outcome: ``output`` (shown to the policy), ``error`` (the call was refused
    or failed), ``done`` (the episode ends: ``submit``), ``edited`` (the workspace changed)."""

    output: str
    error: bool = False
    done: bool = False
    edited: bool = False


def truncate(text: str, budget: int) -> str:
    """``text`` cut to about ``budget`` characters: its head and tail kept, a marker between
    them saying how many characters were cut."""
    if len(text) <= budget:
        return text
    head, tail = budget * 2 // 3, budget // 3
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n[... {cut} characters cut: the output passed the {budget}-character "
        f"budget ...]\n{text[len(text) - tail :]}"
    )


class Tool(ABC):
    """A tool: its name, description and JSON-schema ``parameters``, and how it runs."""

    name: str
    description: str
    parameters: dict

    def schema(self) -> dict:
        """The schema as chat templates take it (``tools=[...]``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def invalid(self, arguments: dict) -> str:
        """Why ``arguments`` do not match the schema, or ``""``."""
        errors = sorted(
            jsonschema.Draft202012Validator(self.parameters).iter_errors(arguments),
            key=lambda e: list(e.path),
        )
        if not errors:
            return ""
        error = errors[0]
        where = "/".join(str(p) for p in error.path)
        return f"arguments of {self.name}{f' ({where})' if where else ''}: {error.message}"

    @abstractmethod
    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        """Run a call whose arguments match the schema.

        Raises:
            SessionLost: the session is gone (not the policy's fault).
        """


def _object(properties: dict, required: list[str]) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


class Bash(Tool):
    """``bash``: run a command in the workspace."""

    name = "bash"
    description = (
        "Run a bash command in the workspace (the current directory) and see its exit code, "
        "standard output and standard error. Processes it starts end with it."
    )
    parameters = _object(
        {
            "command": {"type": "string", "minLength": 1, "description": "The command."},
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "description": "Seconds before the command is killed (capped).",
            },
        },
        ["command"],
    )

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        limits = context.limits
        timeout_s = min(
            float(arguments.get("timeout", limits.default_timeout_s)), limits.max_timeout_s
        )
        try:
            result = context.session.exec(
                arguments["command"],
                timeout_s=timeout_s,
                cwd=context.cwd,
                output_cap_bytes=max(1024, limits.output_chars * 4),
            )
        except ValueError as exc:  # the session refused the command (size, NUL bytes...)
            return ToolResult(f"command refused: {exc}", error=True)
        if result.status == R.INFRA_ERROR:
            raise SessionLost("lost", result.detail or "the session was lost", context.session.id)
        parts = []
        if result.stdout:
            parts.append(result.stdout.rstrip("\n"))
        if result.stderr:
            parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
        if result.status == R.TIMEOUT:
            parts.append(
                f"[timed out after {timeout_s:g} s; the command and its processes were killed]"
            )
        elif result.status in (R.OK, R.FAILED):
            parts.append(f"[exit code {result.exit_code}]")
        else:
            parts.append(f"[{result.status}{f': {result.detail}' if result.detail else ''}]")
        if result.truncated:
            parts.append("[output cut at the session's capture limit]")
        return ToolResult(
            truncate("\n".join(parts), limits.output_chars), error=result.status != R.OK
        )


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.split("\n"), start))


class FileEditor(Tool):
    """``file_editor``: view, create, str_replace, insert, undo_edit."""

    name = "file_editor"
    description = (
        "View and edit files of the workspace. Commands: view (a file with line numbers, or a "
        "directory's entries; view_range [first, last] lines, last -1 for the end), create "
        "(write file_text to path), str_replace (replace old_str, which must occur exactly "
        "once, by new_str), insert (new_str after line insert_line; 0 for the top), undo_edit "
        "(undo the last edit of path)."
    )
    parameters = _object(
        {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
            },
            "path": {"type": "string", "minLength": 1, "description": "Relative to the workspace."},
            "file_text": {"type": "string"},
            "old_str": {"type": "string", "minLength": 1},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer", "minimum": 0},
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
            },
        },
        ["command", "path"],
    )
    _needs = {
        "create": ("file_text",),
        "str_replace": ("old_str",),
        "insert": ("insert_line", "new_str"),
    }

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        command, path = arguments["command"], arguments["path"]
        missing = [name for name in self._needs.get(command, ()) if name not in arguments]
        if missing:
            return ToolResult(f"file_editor {command} needs {', '.join(missing)}", error=True)
        try:
            return getattr(self, f"_{command}")(path, arguments, context)
        except SessionLost:
            raise
        except SessionFileNotFound:
            return ToolResult(f"{path}: no such file in the workspace", error=True)
        except SessionError as exc:
            reasons = {
                "outside": "is outside the workspace (or a link leads out of it)",
                "not_a_file": "is not a regular file",
                "too_large": "is too large for the editor",
            }
            return ToolResult(f"{path}: {reasons.get(exc.kind, exc.detail)}", error=True)

    def _read(self, path: str, context: ToolContext) -> bytes:
        return context.session.read(path, max_bytes=context.limits.file_bytes)

    def _current(self, path: str, context: ToolContext) -> bytes | None:
        try:
            return self._read(path, context)
        except SessionFileNotFound:
            return None

    def _write(self, path: str, before: bytes | None, text: str, context: ToolContext) -> None:
        data = text.encode("utf-8")
        if len(data) > context.limits.file_bytes:
            raise SessionError("too_large", f"{len(data)} bytes")
        context.session.write(path, data)
        context.history.setdefault(path, []).append(before)

    def _view(self, path: str, arguments: dict, context: ToolContext) -> ToolResult:
        entries = None
        try:
            data = self._read(path, context)
        except SessionError as exc:
            if exc.kind != "not_a_file":
                raise
            entries = context.session.list(path, max_entries=1000)
        if entries is not None:
            listing = "\n".join(e.path + ("/" if e.type == "dir" else "") for e in entries)
            return ToolResult(truncate(listing or "(empty directory)", context.limits.output_chars))
        lines = data.decode("utf-8", "replace").split("\n")
        first, last = 1, len(lines)
        if "view_range" in arguments:
            first, last = arguments["view_range"]
            last = len(lines) if last == -1 else last
            if not 1 <= first <= last <= len(lines):
                return ToolResult(
                    f"view_range {arguments['view_range']} is outside 1..{len(lines)} "
                    f"(the file has {len(lines)} lines)",
                    error=True,
                )
        shown = _numbered("\n".join(lines[first - 1 : last]), first)
        return ToolResult(truncate(shown, context.limits.output_chars))

    def _create(self, path: str, arguments: dict, context: ToolContext) -> ToolResult:
        before = self._current(path, context)
        self._write(path, before, arguments["file_text"], context)
        verb = "overwrote" if before is not None else "created"
        return ToolResult(f"{verb} {path}", edited=True)

    def _str_replace(self, path: str, arguments: dict, context: ToolContext) -> ToolResult:
        before = self._read(path, context)
        text = before.decode("utf-8", "replace")
        old, new = arguments["old_str"], arguments.get("new_str", "")
        count = text.count(old)
        if count != 1:
            lines = [text[:i].count("\n") + 1 for i in _find_all(text, old)][:10]
            why = "does not occur" if not count else f"occurs {count} times (lines {lines})"
            return ToolResult(
                f"old_str {why} in {path}; it must match exactly once (add surrounding lines)",
                error=True,
            )
        start = text.index(old)
        updated = text.replace(old, new, 1)
        self._write(path, before, updated, context)
        line = text[:start].count("\n") + 1
        snippet = updated.split("\n")[max(0, line - 3) : line + new.count("\n") + 2]
        return ToolResult(
            f"edited {path}:\n{_numbered(chr(10).join(snippet), max(1, line - 2))}", edited=True
        )

    def _insert(self, path: str, arguments: dict, context: ToolContext) -> ToolResult:
        before = self._read(path, context)
        lines = before.decode("utf-8", "replace").split("\n")
        at = arguments["insert_line"]
        if at > len(lines):
            return ToolResult(
                f"insert_line {at} is past the end of {path} ({len(lines)} lines)", error=True
            )
        new_lines = arguments["new_str"].split("\n")
        self._write(path, before, "\n".join(lines[:at] + new_lines + lines[at:]), context)
        return ToolResult(
            f"inserted {len(new_lines)} line(s) after line {at} of {path}", edited=True
        )

    def _undo_edit(self, path: str, arguments: dict, context: ToolContext) -> ToolResult:
        stack = context.history.get(path)
        if not stack:
            return ToolResult(f"no edit of {path} to undo", error=True)
        before = stack.pop()
        if before is None:
            context.session.exec(f"rm -f -- {shlex.quote(path)}", timeout_s=10)
            return ToolResult(f"undid the creation of {path}", edited=True)
        context.session.write(path, before)
        return ToolResult(f"restored {path} as it was before its last edit", edited=True)


def _find_all(text: str, part: str):
    start = text.find(part)
    while start != -1:
        yield start
        start = text.find(part, start + 1)


class RunTests(Tool):
    """``run_tests``: the task's visible tests on the current workspace."""

    name = "run_tests"
    description = "Run the task's visible tests on the workspace as it is now and see the results."
    parameters = _object({}, [])

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        if context.run_visible_tests is None:
            return ToolResult("this task has no visible tests to run", error=True)
        return context.run_visible_tests()


class Submit(Tool):
    """``submit``: end the episode; the workspace as it is is graded."""

    name = "submit"
    description = "Submit the workspace as it is now as your answer. This ends the episode."
    parameters = _object({}, [])

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        return ToolResult("Submitted.", done=True)


class MachineBash(Bash):
    """``bash`` on a terminal task's machine: its services and background processes live on
    between calls (the session keeps them)."""

    description = (
        "Run a bash command on the machine, in your working directory, and see its exit code, "
        "standard output and standard error. Processes you start in the background (a service) "
        "keep running after the command returns."
    )


class MachineFileEditor(FileEditor):
    """``file_editor`` on a terminal task's machine: paths are absolute, or relative to the
    working directory."""

    description = (
        "View and edit files on the machine. Commands: view (a file with line numbers, or a "
        "directory's entries; view_range [first, last] lines, last -1 for the end), create "
        "(write file_text to path), str_replace (replace old_str, which must occur exactly "
        "once, by new_str), insert (new_str after line insert_line; 0 for the top), undo_edit "
        "(undo the last edit of path). Paths are absolute or relative to the working directory; "
        "the editor reaches the task's own directories (read others with bash)."
    )
    parameters = {
        **FileEditor.parameters,
        "properties": {
            **FileEditor.parameters["properties"],
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Absolute, or relative to the working directory.",
            },
        },
    }

    def run(self, arguments: dict, context: ToolContext) -> ToolResult:
        path = arguments["path"]
        if not path.startswith("/"):
            path = posixpath.normpath(posixpath.join(context.cwd, path))
        return super().run({**arguments, "path": path}, context)


def coding_tools() -> list[Tool]:
    """The coding agent's tools: bash, the file editor, run_tests, submit."""
    return [Bash(), FileEditor(), RunTests(), Submit()]


def machine_tools() -> list[Tool]:
    """A terminal task's tools: bash and the file editor on its machine, submit."""
    return [MachineBash(), MachineFileEditor(), Submit()]


def run_call(
    tools: dict[str, Tool], call: ToolCall, context: ToolContext
) -> tuple[ToolRecord, ToolResult]:
    """Run one parsed call: an unknown tool or arguments that do not match its schema are an
    error observation; the output is cut to the budget.

    Raises:
        SessionLost: the session is gone.
    """
    started = time.monotonic()
    tool = tools.get(call.name)
    if tool is None:
        result = ToolResult(
            f"unknown tool {call.name!r}; the tools are: {', '.join(sorted(tools))}", error=True
        )
    elif why := tool.invalid(call.arguments):
        result = ToolResult(why, error=True)
    else:
        result = tool.run(call.arguments, context)
    output = truncate(result.output, context.limits.output_chars)
    record = ToolRecord(
        call_id=call.id,
        name=call.name,
        arguments=call.arguments,
        output=output,
        error=result.error,
        seconds=time.monotonic() - started,
    )
    return record, result
