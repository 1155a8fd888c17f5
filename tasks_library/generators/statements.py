"""Problem statements for generated repository bugs, written as a user's issue would be.

A statement says what misbehaves and how it shows: the failing tests' names (humanised), the
inputs their parametrisation names, and the errors they end with (exception type and first
line of the message, as pytest reports it). It never pastes a test's source, and it never
names the changed module, function or line: finding those is the task.

(An LLM rewrite through an OpenAI-compatible endpoint is not done here: the client that
Crucible has lives in ``training.monitors``, which ``tasks_library`` may not import.)
"""

from __future__ import annotations

import re

SHOWN_TESTS = 5
MESSAGE_CHARS = 200
_PARAMS = re.compile(r"^(?P<name>[^\[]*)(?:\[(?P<params>.*)\])?$")


def describe_test(node_id: str) -> tuple[str, str, str]:
    """``(module path, readable name, parameters)`` of a pytest node id:
    ``tests/test_lru.py::LRUCacheTest::test_lru`` -> ``("tests/test_lru.py", "LRUCacheTest
    lru", "")``; ``test_x.py::test_camelize[foo_bar-FooBar]`` -> ``(..., "camelize",
    "foo_bar-FooBar")``."""
    module, _, rest = node_id.partition("::")
    match = _PARAMS.match(rest)
    name, params = (match["name"], match["params"] or "") if match else (rest, "")
    parts = [
        p.removeprefix("test_").removeprefix("Test").replace("_", " ") for p in name.split("::")
    ]
    return module, " / ".join(part.strip() or name for part in parts), params


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def problem_statement(project: str, version: str, failing: dict[str, str], *, total: int) -> str:
    """The problem statement of a bug that makes the tests in ``failing`` fail.

    Args:
        project, version: the project (``inflection``, ``0.5.1``).
        failing: FAIL_TO_PASS node id -> the first line of its failure (may be ``""``).
        total: how many tests the suite runs (the rest still pass).

    Returns:
        Markdown text: a title line, what is wrong, the failures (at most SHOWN_TESTS, with
        how many more), and what a fix must keep.
    """
    ids = sorted(failing)
    names = []
    for node_id in ids:
        _module, name, _params = describe_test(node_id)
        if name not in names:
            names.append(name)
    subject = ", ".join(f"`{n}`" for n in names[:3]) + (" and others" if len(names) > 3 else "")
    count = len(ids)
    lines = [
        f"# {project} {version}: {subject} {'is' if len(names) == 1 else 'are'} broken",
        "",
        f"After a recent change, {project} misbehaves: {count} of its {total} tests now fail "
        f"({'it' if count == 1 else 'they'} passed before), while the rest still pass.",
        "",
        "What I see:",
        "",
    ]
    for node_id in ids[:SHOWN_TESTS]:
        module, name, params = describe_test(node_id)
        message = _one_line(failing[node_id]) if failing[node_id] else "fails"
        where = f" with `{params}`" if params else ""
        lines.append(f"- `{name}` (in `{module}`){where}: {message}")
    if count > SHOWN_TESTS:
        lines.append(f"- ... and {count - SHOWN_TESTS} more failing test(s)")
    lines += [
        "",
        "The failing test ids:",
        "",
        *(f"    {node_id}" for node_id in ids),
        "",
        f"Please fix {project}'s code (not its tests) so that these pass again and every other "
        "test keeps passing.",
    ]
    return "\n".join(lines) + "\n"
