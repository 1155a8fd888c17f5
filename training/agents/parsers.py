"""Tool-call parsing: an assistant turn's text -> its content and tool calls.

A parser never raises on what the policy wrote: malformed calls become ``errors`` (each
returned to the policy as an error observation it can learn from). Another model family's
format is one more :class:`ToolCallParser` registered in :data:`PARSERS`.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from core.errors import InputError


@dataclass(frozen=True)
class ToolCall:
    """One call the policy made: ``name``, ``arguments`` (a JSON object), ``id`` (``call_<n>``
    in the turn's order)."""

    id: str
    name: str
    arguments: dict

    def to_message(self) -> dict:
        """The OpenAI-style ``tool_calls`` entry."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class ParsedMessage:
    """An assistant turn, parsed.

    Attributes:
        content: the text outside the tool calls (thinking, prose), stripped.
        tool_calls: the well-formed calls, in order.
        errors: one line per malformed call (invalid JSON, no name, arguments not an object,
            an unclosed tag), in order.
    """

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_message(self) -> dict:
        """The OpenAI-style assistant message (what the console and demonstrations store)."""
        message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


class ToolCallParser(ABC):
    """Reads one model family's tool-call format."""

    name: str

    @abstractmethod
    def parse(self, text: str) -> ParsedMessage:
        """``text`` (an assistant turn without its end-of-turn token) parsed; never raises."""


def _as_call(index: int, body: str) -> ToolCall | str:
    """A :class:`ToolCall` of the JSON ``body`` of call ``index``, or the error line."""
    where = f"tool call {index + 1}"
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return f"{where}: invalid JSON ({exc.msg} at character {exc.pos}); write one JSON object"
    if not isinstance(data, dict):
        return f'{where}: expected a JSON object {{"name": ..., "arguments": {{...}}}}'
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return f'{where}: "name" must be the tool\'s name (a string)'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return f'{where} ({name}): "arguments" is a string that is not a JSON object'
    if not isinstance(arguments, dict):
        return f'{where} ({name}): "arguments" must be a JSON object'
    return ToolCall(id=f"call_{index}", name=name, arguments=arguments)


class HermesParser(ToolCallParser):
    """Hermes / Qwen2.5 / Qwen3: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``,
    any number per turn, with free text around them."""

    name = "hermes"
    _block = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    def parse(self, text: str) -> ParsedMessage:
        calls, errors = [], []
        for index, match in enumerate(self._block.finditer(text)):
            call = _as_call(index, match.group(1).strip())
            (errors if isinstance(call, str) else calls).append(call)
        rest = self._block.sub("", text)
        if "<tool_call>" in rest:
            errors.append(
                "a <tool_call> tag is never closed; end each call with </tool_call>"
                + (" before the turn ends" if rest.rstrip().endswith("}") else "")
            )
            rest = rest.split("<tool_call>", 1)[0]
        return ParsedMessage(content=rest.strip(), tool_calls=calls, errors=errors)


PARSERS: dict[str, type[ToolCallParser]] = {HermesParser.name: HermesParser}


def parser_named(name: str) -> ToolCallParser:
    """The registered parser ``name``.

    Raises:
        InputError: no parser of that name (the message lists them).
    """
    if name not in PARSERS:
        raise InputError(
            f"unknown tool-call format {name!r}; known: {', '.join(sorted(PARSERS))}",
            field="tool_call_format",
        )
    return PARSERS[name]()
