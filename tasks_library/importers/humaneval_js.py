"""Read HumanEval-X's JavaScript JSONL (``JavaScript/0`` ... ``JavaScript/163``).

The dataset (Apache-2.0, from CodeGeeX's HumanEval-X) ships with Crucible in
``tasks_library/data``. Its tests call the entry point by name and assert with
``console.assert``; its ``example_test`` (the prompt's own examples) is the visible
suite shown to the policy, the full ``test`` the hidden one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import read_jsonl

REQUIRED_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "declaration")
ENTRY_POINT = re.compile(r"^\s*(?:const|let|var|function)\s+([A-Za-z_$][\w$]*)", re.MULTILINE)


def default_path() -> Path:
    """The HumanEval-X JavaScript file that ships with Crucible."""
    return Path(__file__).resolve().parents[1] / "data" / "humaneval_js.jsonl.gz"


def read_humaneval_js(path: Path) -> Iterator[dict]:
    """Yield task records from a HumanEval-X JavaScript JSONL file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`, or a
            ``declaration`` that declares no function.
    """
    for where, row in read_jsonl(path, REQUIRED_FIELDS):
        # The last declaration is the function to write; earlier ones are helpers the
        # prompt gives (JavaScript/10 declares isPalindrome before makePalindrome).
        names = ENTRY_POINT.findall(row["declaration"])
        if not names:
            raise ImportFormatError(
                where,
                "field 'declaration': declares no function (expected `const name = ...`)",
                field="declaration",
            )
        visible = row.get("example_test")
        yield {
            "task_id": row["task_id"],
            "prompt": row["prompt"],
            "entry_point": names[-1],
            "reference_solution": row["canonical_solution"],
            "tests": row["test"],
            "visible_tests": visible if isinstance(visible, str) and visible.strip() else None,
            "harness": "js-console-assert",
            "where": where,
        }
