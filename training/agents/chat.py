"""Chat templates, token in / token out: the policy's own template renders every message.

A trajectory's ids are never a re-tokenisation of its conversation. The prompt (system,
user, tool schemas) is templated once; after that the trajectory grows by what the policy
sampled (kept as sampled) and by each observation *increment*: the text the template adds
for the new tool messages and the next generation prompt, templated on its own and
tokenised alone (:meth:`ChatTemplate.observation_ids`). verl's agent loop and SkyRL compute
increments the same way; re-templating the whole history changes tokens the policy sampled
(verl's docs: PPO then fails to converge).

The increment of messages ``M`` is ``render(base + M, generation prompt) - render(base)``
for a fixed three-message ``base`` (system, user, assistant), plus whatever the template
writes after the assistant's end-of-turn token (ChatML: ``"\\n"``): the sampled ids stop at
that token, the template's rendering of the turn does not.

:data:`CHATML_TOOLS_TEMPLATE` is the default local policy's own template: ChatML with
the Hermes/Qwen tool format (tool schemas in the system message inside ``<tools>``, calls as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, results as ``<tool_response>``
inside a user turn), so the default policy walks the code path a Qwen2.5 checkpoint walks.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers.utils.chat_template_utils import (
    _get_control_token_patterns,
    mark_control_tokens,
    render_jinja_template,
)

from core.errors import InputError

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
ENDOFTEXT = "<|endoftext|>"

# Special tokens of the default local policy's tokenizer: the ChatML markers and a pad (its
# own, not the end-of-turn token). The tool-call markers are ordinary added tokens, as in
# Qwen2.5, so that decoding keeps them.
CHATML_SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]
CHATML_ADDED_TOKENS = [TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE]

CHATML_TOOLS_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set system = messages[0].content %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system = 'You are a coding agent.' %}{%- set rest = messages %}"
    "{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nCall tools inside <tool_call></tool_call> tags, one JSON object "
    'each: {"name": <tool name>, "arguments": <arguments object>}. The tools:\\n<tools>\' }}'
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>' }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message.role == 'tool' %}"
    "{%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + call.name + \'", "arguments": \' '
    "+ (call.arguments | tojson) + '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# The fixed conversation the observation increments are templated after.
_BASE = (
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
)


def chatml_text(messages: list[dict], tools: list[dict] | None = None) -> str:
    """``messages`` rendered with :data:`CHATML_TOOLS_TEMPLATE` as text (no tokenizer needed):
    what the default policy's tokenizer is trained on."""
    rendered, _ = render_jinja_template(
        conversations=[messages], tools=tools or None, chat_template=CHATML_TOOLS_TEMPLATE
    )
    return rendered[0]


class ChatTemplateMissing(InputError):
    """A tokenizer with no chat template, or one that cannot render a tool conversation."""


@dataclass
class ChatTemplate:
    """The policy's tokenizer and its chat template, rendering messages to ids.

    Attributes:
        tokenizer: a ``transformers`` tokenizer whose ``chat_template`` renders system, user,
            assistant (with ``tool_calls``) and ``tool`` messages, and takes ``tools=``.
        end_of_turn: the token that ends an assistant turn (ChatML ``<|im_end|>``); sampling
            stops on it. Default: the tokenizer's ``eos_token``.
    """

    tokenizer: object
    end_of_turn: str = ""

    def __post_init__(self) -> None:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ChatTemplateMissing(
                "the policy's tokenizer has no chat template: add a Jinja `chat_template` to its "
                "tokenizer_config.json (or a chat_template.jinja beside it) that renders system, "
                "user, assistant (with tool_calls) and tool messages and takes `tools`",
                field="model_path",
            )
        self.end_of_turn = self.end_of_turn or (self.tokenizer.eos_token or "")
        ids = self.encode(self.end_of_turn) if self.end_of_turn else []
        if len(ids) != 1:
            raise ChatTemplateMissing(
                f"the end-of-turn token {self.end_of_turn!r} is not one token of the policy's "
                f"vocabulary (it encodes to {ids}); set the tokenizer's eos_token to the token "
                f"its chat template closes an assistant turn with",
                field="model_path",
            )
        self.end_of_turn_id = ids[0]
        try:
            before = self.render(list(_BASE))
            after = self.render([*_BASE, {"role": "tool", "content": "t"}], generation=True)
        except Exception as exc:  # a template error of any kind is the user's input
            raise ChatTemplateMissing(
                f"the policy's chat template cannot render a tool conversation ({exc}); it must "
                f"render system, user, assistant and tool messages",
                field="model_path",
            ) from exc
        if not after.startswith(before) or self.end_of_turn not in before:
            raise ChatTemplateMissing(
                "the policy's chat template rewrites earlier messages when a tool message "
                "follows, or never writes the end-of-turn token "
                f"{self.end_of_turn!r}: observations cannot be templated on their own",
                field="model_path",
            )
        # Control tokens written inside message contents (a tool output printing "<|im_end|>",
        # a task prompt, a demonstration) are encoded as plain text, never as the template's
        # own markers: transformers' sanitising of chat inputs, applied to each increment.
        self._control = _get_control_token_patterns(
            self.tokenizer._get_control_tokens(self.tokenizer.chat_template)
        )[0]
        # What the template writes after an assistant turn's end-of-turn token (ChatML: "\n").
        self._after_turn = before[before.rindex(self.end_of_turn) + len(self.end_of_turn) :]
        self._base_text = before

    @property
    def pad_id(self) -> int:
        """The pad id: the tokenizer's, or the end-of-turn id when it has none (only ever
        behind attention 0, so the choice changes no logit)."""
        pad = self.tokenizer.pad_token_id
        return self.end_of_turn_id if pad is None else int(pad)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (special tokens in the text are recognised; none are added)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _mark(self, value):
        """``value`` (messages, tools) with the control tokens inside its strings marked."""
        return mark_control_tokens(value, self._control)

    def _encode_marked(self, text: str) -> list[int]:
        """Ids of a rendering of marked inputs: marked control tokens as plain text."""
        if not text:
            return []
        encoded = self.tokenizer(text, add_special_tokens=False, sanitize_control_tokens=True)
        return list(encoded["input_ids"])

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``, every token kept (tool-call markers and end-of-turn included)."""
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def render(
        self, messages: list[dict], *, tools: list[dict] | None = None, generation: bool = False
    ) -> str:
        """The template's text for ``messages`` (OpenAI-style dicts), ``tools`` (JSON schemas
        ``{"type": "function", "function": {...}}``), with the assistant generation prompt
        when ``generation``."""
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=generation
        )

    def prompt_ids(self, messages: list[dict], *, tools: list[dict] | None = None) -> list[int]:
        """Ids of the opening messages and the generation prompt: a trajectory's first ids
        (control tokens inside the contents encoded as text)."""
        rendered = self.render(self._mark(messages), tools=self._mark(tools), generation=True)
        return self._encode_marked(rendered)

    def assistant_ids(self, message: dict) -> list[int]:
        """Ids of an assistant ``message`` written the way the template renders it, up to and
        including its end-of-turn token: what the policy samples to write that message (a
        demonstration's trained ids)."""
        before = self.render(list(_BASE[:2]), generation=True)
        after = self.render([*_BASE[:2], self._mark(message)])
        if not after.startswith(before[: before.rindex(self.end_of_turn)]):
            raise ChatTemplateMissing(
                "the policy's chat template renders an assistant turn apart from its generation "
                "prompt; demonstrations cannot be rendered as sampled",
                field="model_path",
            )
        # The generation prompt's text is a prefix of the rendered turn in ChatML-like
        # templates; where a template differs (it strips or re-renders), start after the
        # common part.
        common = 0
        while common < min(len(before), len(after)) and before[common] == after[common]:
            common += 1
        text = after[common:]
        end = text.find(self.end_of_turn)
        if end == -1:
            raise ChatTemplateMissing(
                f"the chat template closes no assistant turn with {self.end_of_turn!r}",
                field="model_path",
            )
        return self._encode_marked(text[: end + len(self.end_of_turn)])

    def observation_ids(self, messages: list[dict], *, closed: bool = True) -> list[int]:
        """Ids of the increment that follows an assistant turn: ``messages`` (tool or user
        messages) and the next generation prompt, templated on their own.

        Args:
            closed: the turn ended with the end-of-turn token; False prepends that token (a
                turn cut by its token budget is closed the way the template closes one).

        Control tokens inside the messages (a hostile tool output printing
        ``<|im_end|>\n<|im_start|>system``) are encoded as plain text.
        """
        after = self.render([*_BASE, *self._mark(messages)], generation=True)
        if not after.startswith(self._base_text):
            raise ChatTemplateMissing(
                "the policy's chat template rewrites earlier messages when these follow; "
                "observations cannot be templated on their own",
                field="model_path",
            )
        text = self._after_turn + after[len(self._base_text) :]
        return ([] if closed else [self.end_of_turn_id]) + self._encode_marked(text)
