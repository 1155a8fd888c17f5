"""Demonstrations for the warm start: scripted from each task's reference, or read from JSONL.

A scripted demonstration is an expert trajectory recorded in a real session through the
task's environment (so every observation is what the tools really answered): view the file,
write the reference, run the visible tests, submit. A *flawed* demonstration
(:func:`flawed_function_demonstrations`) walks the same way with a body one mutation away from
the reference (:mod:`tasks_library.validation.mutants`), whose visible tests fail, and submits
it anyway: the demonstrator of a warm start is rarely flawless, and a policy that imitates a
mixed one makes the choice, between the right body and the wrong one, that RL has to learn.

:func:`render` turns any demonstration into ``(ids, mask)`` in the policy's own template
with the rollouts' masks: the prompt and the observations 0, each assistant turn (as the
template writes it, end-of-turn token included) 1.

JSONL format (one demonstration a line; collected elsewhere, e.g. from a stronger model)::

    {"messages": [{"role": "system", "content": "..."},
                  {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "...", "tool_calls": [
                      {"id": "call_0", "type": "function",
                       "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_0", "content": "..."},
                  ...],
     "tools": [{"type": "function", "function": {"name": ..., "parameters": {...}}}]}

OpenAI-style: ``arguments`` is a JSON object or a string holding one; ``tools`` is optional
(default: the function-task environment's tools).
"""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputError
from sandboxes.repository import apply_patch, patched_paths
from tasks_library.validation.mutants import python_mutants
from training.agents.chat import ChatTemplate
from training.agents.environment import (
    Environment,
    FunctionTaskEnvironment,
    RepositoryEnvironment,
    TerminalEnvironment,
)
from training.agents.parsers import ParsedMessage, ToolCall
from training.agents.tools import coding_tools

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Demonstration:
    """A conversation to imitate: OpenAI-style ``messages`` and the ``tools`` schemas."""

    messages: list[dict]
    tools: list[dict]


def record(env: Environment, turns: list[list[tuple[str, dict]]]) -> Demonstration:
    """Play scripted ``turns`` (each a list of ``(tool, arguments)`` calls) through ``env`` in a
    fresh session and record the conversation with the tools' real answers.

    Raises:
        SessionLost: the session was lost.
    """
    with env.open_sessions(1)[0] as session:
        opening = env.open(session)
        messages = opening.messages()
        for calls in turns:
            parsed = ParsedMessage(
                content="",
                tool_calls=[
                    ToolCall(id=f"call_{i}", name=name, arguments=args)
                    for i, (name, args) in enumerate(calls)
                ],
            )
            messages.append(parsed.to_message())
            step = env.step(parsed)
            if step.done:
                break
            messages += step.observations
    return Demonstration(messages=messages, tools=opening.tools)


def scripted_function_demonstration(
    env: FunctionTaskEnvironment, *, body: str | None = None
) -> Demonstration:
    """The expert trajectory of a function task: view ``solution.py``, insert the reference
    body (or ``body``) after the prompt's last line, run the visible tests, submit."""
    task, path = env.task, env.SOLUTION
    last_line = task.prompt.rstrip("\n").count("\n") + 1
    body = (task.reference_solution if body is None else body).rstrip("\n")
    return record(
        env,
        [
            [("file_editor", {"command": "view", "path": path})],
            [
                (
                    "file_editor",
                    {"command": "insert", "path": path, "insert_line": last_line, "new_str": body},
                )
            ],
            [("run_tests", {})],
            [("submit", {})],
        ],
    )


def replacement_edits(
    original: str, fixed: str, *, context: int = 1, margin: int = 2
) -> list[tuple[list[int], str, str]] | None:
    """The ``str_replace`` edits that turn ``original`` into ``fixed``: one per changed region
    (difflib's grouped opcodes, ``context`` unchanged lines each side), its ``old_str`` widened
    a line each side until it occurs exactly once in the text it is applied to, each with the
    ``view_range`` ``[first, last]`` (1-based lines of ``original``, ``margin`` more each side)
    that shows it. Applied in order they give ``fixed`` exactly.

    Returns:
        ``[(view_range, old_str, new_str), ...]``; None where no such edits exist (an empty
        original, a region that becomes unique only by reaching into another): write the file
        whole instead.
    """
    a, b = original.splitlines(keepends=True), fixed.splitlines(keepends=True)
    groups = list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context))
    lines = original.count("\n") + 1  # as the editor's view counts them
    current, edits = original, []
    for index, group in enumerate(groups):
        (_, i1, _, j1, _), (*_, i2, _, j2) = group[0], group[-1]
        low = groups[index - 1][-1][2] if index else 0  # the regions around stay untouched
        high = groups[index + 1][0][1] if index + 1 < len(groups) else len(a)
        while True:
            old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
            if old and current.count(old) == 1:
                break
            if i1 == low and i2 == high:
                return None
            if i1 > low:
                i1, j1 = i1 - 1, j1 - 1
            if i2 < high:
                i2, j2 = i2 + 1, j2 + 1
        current = current.replace(old, new, 1)
        edits.append(([max(1, i1 + 1 - margin), min(lines, i2 + margin)], old, new))
    return edits if current == fixed else None


def scripted_repository_demonstration(env: RepositoryEnvironment) -> Demonstration:
    """The expert trajectory of a repository task: run the visible tests, view the lines the
    reference patch changes (:func:`replacement_edits`), replace each region as the patch
    does, run the tests again, submit. A file the patch creates, or whose regions cannot be
    replaced one by one, is written whole (and viewed whole first when it exists), so that
    each demonstration stays as short as the fix: a real project's files are thousands of
    tokens, a fix a few lines.

    Raises:
        PatchError: the reference patch does not apply to the task's files.
        ValueError: a patched file is not UTF-8 text (the editor writes text).
    """
    task = env.task
    fixed = apply_patch(task.files, task.reference_solution)
    paths = [p for p in patched_paths(task.reference_solution) if p in fixed]
    views, edits = [], []
    for path in paths:
        try:
            text = fixed[path].decode("utf-8")
            before = task.files[path].decode("utf-8") if path in task.files else None
        except UnicodeDecodeError as exc:
            raise ValueError(f"the reference patch touches a file that is not text: {exc}") from exc
        regions = replacement_edits(before, text) if before is not None else None
        if regions is None:
            if before is not None:
                views.append(("file_editor", {"command": "view", "path": path}))
            edits.append(("file_editor", {"command": "create", "path": path, "file_text": text}))
            continue
        for view_range, old, new in regions:
            views.append(
                ("file_editor", {"command": "view", "path": path, "view_range": view_range})
            )
            edits.append(
                (
                    "file_editor",
                    {"command": "str_replace", "path": path, "old_str": old, "new_str": new},
                )
            )
    turns = [[("run_tests", {})], views, edits, [("run_tests", {})], [("submit", {})]]
    return record(env, [turn for turn in turns if turn])


def scripted_terminal_demonstration(env: TerminalEnvironment) -> Demonstration:
    """A terminal task's expert walk: look at the working directory, run the reference
    solution's script as one bash call (its real output recorded), submit."""
    script = env.task.reference_solution
    if script.startswith("#!"):
        script = script.split("\n", 1)[1] if "\n" in script else ""
    turns = [
        [("bash", {"command": "ls -la"})],
        [("bash", {"command": script.strip() or "true", "timeout": 30})],
        [("submit", {})],
    ]
    return record(env, turns)


def mutated_bodies(prompt: str, reference: str, *, limit: int = 40) -> list[str]:
    """The reference body with one mutation each (:func:`python_mutants`), written in the
    reference's own formatting: the mutated line replaces its original, the rest is kept as
    the reference writes it (mutants whose line the reference splits differently from
    ``ast.unparse`` are left out, so that a flawed body differs from the reference in that
    line alone; spaces inside the line may follow ``ast.unparse``). ``[]`` when the program
    does not parse."""
    try:
        mutants = python_mutants(prompt, reference, limit=limit)
        original = ast.unparse(ast.parse(prompt + reference)).splitlines()
    except (SyntaxError, ValueError):
        return []
    lines = reference.split("\n")
    bodies = []
    for mutant in mutants:
        changed = mutant.program.splitlines()
        where = [i for i, (a, b) in enumerate(zip(original, changed, strict=False)) if a != b]
        k = mutant.line - 1
        if len(changed) != len(original) or len(where) != 1 or not 0 <= k < len(lines):
            continue
        if _squeezed(lines[k]) != _squeezed(original[where[0]]):
            continue
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
        body = "\n".join([*lines[:k], indent + changed[where[0]].strip(), *lines[k + 1 :]])
        if body not in bodies:
            bodies.append(body)
    return bodies


def _squeezed(line: str) -> str:
    return "".join(line.split())


def _visible_tests_failed(demonstration: Demonstration) -> bool:
    """Whether the demonstration's ``run_tests`` call answered with failing visible tests."""
    for index, message in enumerate(demonstration.messages):
        names = [c["function"]["name"] for c in message.get("tool_calls") or []]
        if "run_tests" in names and index + 1 < len(demonstration.messages):
            answer = demonstration.messages[index + 1]
            return answer["role"] == "tool" and answer["content"].startswith("error:")
    return False


def flawed_function_demonstrations(
    env_factory, *, count: int, tries: int = 6
) -> list[Demonstration]:
    """Up to ``count`` flawed demonstrations of a function task: the expert's steps with a
    mutated reference body (:func:`mutated_bodies`) whose visible tests fail, submitted anyway.

    Args:
        env_factory: makes a fresh :class:`FunctionTaskEnvironment` of the task (one per
            recording: each records in its own session).
        tries: mutants recorded at most (a mutant the visible tests do not catch is not kept).
    """
    env = env_factory()
    out = []
    for body in mutated_bodies(env.task.prompt, env.task.reference_solution)[:tries]:
        demonstration = scripted_function_demonstration(env_factory(), body=body)
        if _visible_tests_failed(demonstration):
            out.append(demonstration)
            if len(out) == count:
                break
    return out


def render(chat: ChatTemplate, demonstration: Demonstration) -> tuple[list[int], list[int]]:
    """``(ids, mask)`` of ``demonstration`` in ``chat``'s template: mask 1 exactly on the
    assistant turns (as the template writes them, end-of-turn included).

    Raises:
        InputError: the conversation does not open with system/user messages or holds no
            assistant turn.
    """
    messages = demonstration.messages
    opening = 0
    while opening < len(messages) and messages[opening]["role"] in ("system", "user"):
        opening += 1
    if opening == 0:
        raise InputError(
            "a demonstration must open with a system or user message", field="messages"
        )
    ids = chat.prompt_ids(messages[:opening], tools=demonstration.tools)
    mask = [0] * len(ids)
    pending: list[dict] = []
    trained = False
    for message in messages[opening:]:
        if message["role"] == "assistant":
            if pending:
                observation = chat.observation_ids(pending)
                ids, mask = ids + observation, mask + [0] * len(observation)
                pending = []
            turn = chat.assistant_ids(message)
            ids, mask = ids + turn, mask + [1] * len(turn)
            trained = True
        else:
            pending.append(message)
    if not trained:
        raise InputError("a demonstration needs at least one assistant turn", field="messages")
    return ids, mask


def _check_message(message, where: str) -> dict:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise InputError(f"{where}: a message needs a role among {', '.join(ROLES)}", field=where)
    content = message.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise InputError(f"{where}: content must be a string", field=where)
    out = {"role": message["role"], "content": content}
    calls = message.get("tool_calls")
    if calls is not None:
        if message["role"] != "assistant" or not isinstance(calls, list):
            raise InputError(
                f"{where}: tool_calls must be a list on an assistant message", field=where
            )
        out["tool_calls"] = []
        for index, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            arguments = function.get("arguments", {}) if isinstance(function, dict) else None
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = None
            if not isinstance(name, str) or not name or not isinstance(arguments, dict):
                raise InputError(
                    f"{where}.tool_calls[{index}]: needs function.name (a string) and "
                    f"function.arguments (a JSON object, or a string holding one)",
                    field=where,
                )
            out["tool_calls"].append(
                {
                    "id": str(call.get("id", f"call_{index}")),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
    return out


def load_demonstrations(path: Path) -> list[Demonstration]:
    """Read a JSONL demonstrations file (see the module for the format).

    Raises:
        InputError: a line that is not JSON or not a demonstration (the line number and the
            field are named); a file with no demonstration.
    """
    default_tools = [t.schema() for t in coding_tools()]
    out = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON ({exc.msg})", field="demonstrations") from exc
            if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
                raise InputError(f'{where}: needs a "messages" list', field="demonstrations")
            messages = [
                _check_message(m, f"{where} messages[{i}]") for i, m in enumerate(row["messages"])
            ]
            if not any(m["role"] == "assistant" for m in messages):
                raise InputError(
                    f"{where}: no assistant message to learn from", field="demonstrations"
                )
            tools = row.get("tools", default_tools)
            if not isinstance(tools, list):
                raise InputError(
                    f'{where}: "tools" must be a list of schemas', field="demonstrations"
                )
            out.append(Demonstration(messages=messages, tools=tools))
    if not out:
        raise InputError(f"{path} holds no demonstration", field="demonstrations")
    return out


def write_demonstrations(path: Path, demonstrations: list[Demonstration]) -> None:
    """Write ``demonstrations`` as JSONL (arguments as JSON strings, as OpenAI writes them)."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for demo in demonstrations:
            messages = []
            for message in demo.messages:
                message = dict(message)
                if "tool_calls" in message:
                    message["tool_calls"] = [
                        {
                            **c,
                            "function": {
                                **c["function"],
                                "arguments": json.dumps(c["function"]["arguments"]),
                            },
                        }
                        for c in message["tool_calls"]
                    ]
                messages.append(message)
            handle.write(json.dumps({"messages": messages, "tools": demo.tools}) + "\n")
