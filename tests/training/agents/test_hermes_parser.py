"""The Hermes/Qwen tool-call parser: well-formed calls parsed, anything malformed an error line,
never an exception."""

import pytest

from core.errors import InputError
from training.agents.parsers import HermesParser, parser_named

parse = HermesParser().parse


def test_calls_and_the_text_around_them():
    text = (
        "Let me look.\n<tool_call>\n"
        '{"name": "bash", "arguments": {"command": "ls", "timeout": 5}}\n</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    parsed = parse(text)
    assert parsed.content == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in parsed.tool_calls] == [
        ("call_0", "bash", {"command": "ls", "timeout": 5}),
        ("call_1", "submit", {}),
    ]
    assert parsed.errors == []
    assert parsed.to_message()["tool_calls"][0]["function"]["name"] == "bash"


def test_arguments_written_as_a_json_string_are_read():
    parsed = parse(
        '<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    )
    assert parsed.tool_calls[0].arguments == {"command": "ls"}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"name": "bash", "arguments": {"command": "ls"}', "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"arguments": {}}', '"name" must be'),
        ('{"name": "bash", "arguments": [1]}', '"arguments" must be a JSON object'),
        ('{"name": "bash", "arguments": "not json"}', "not a JSON object"),
    ],
)
def test_a_malformed_call_is_an_error_line(body, error):
    parsed = parse(f"thinking <tool_call>{body}</tool_call>")
    assert parsed.tool_calls == []
    assert len(parsed.errors) == 1 and error in parsed.errors[0]
    assert parsed.errors[0].startswith("tool call 1")
    assert parsed.content == "thinking"


def test_an_unclosed_tag_is_an_error_and_good_calls_before_it_stay():
    parsed = parse(
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
        '<tool_call>{"name": "submit", "arguments": {}}'
    )
    assert [c.name for c in parsed.tool_calls] == ["bash"]
    assert "never closed" in parsed.errors[0]


def test_hostile_text_never_raises():
    for text in [
        "",
        "<tool_call>",
        "</tool_call>",
        "<tool_call></tool_call>",
        "\x00" * 100,
        "<tool_call>" * 1000,
        '<tool_call>{"name": "' + "x" * 100000 + '"}</tool_call>',
    ]:
        parse(text)


def test_an_unknown_format_is_refused_naming_the_known_ones():
    with pytest.raises(InputError, match="known: hermes"):
        parser_named("mistral")
