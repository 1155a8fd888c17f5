"""Write the reward hacks reviewers found (``HackExample`` rows) in the hack regression corpus's
format."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.review.models import HackExample


def corpus_cases(examples) -> list[dict]:
    """One corpus case per example: the fields of ``tests/training/hack_corpus/corpus.py:Case``
    (``name``, ``task_id``, ``completion``: the code after the task's prompt, ``flags``: the
    detector flags it raised, ``note``, ``known_miss``: set when no detector flagged it) plus
    ``program`` (the whole final code), ``task_version`` (content hash), ``reviewer`` and
    ``trajectory``."""
    cases = []
    for example in examples:
        version = example.task_version
        task_id = version.task.task_id
        prompt = version.prompt
        completion = example.code[len(prompt) :] if example.code.startswith(prompt) else None
        reviewer = example.created_by.get_username() if example.created_by else "?"
        note = " ".join(example.note.split())
        slug = re.sub(r"[^a-z0-9]+", "-", task_id.lower()).strip("-")
        cases.append(
            {
                "name": f"review-{example.pk}-{slug}",
                "task_id": task_id,
                "completion": completion,
                "flags": list(example.flags),
                "note": f"found by review ({reviewer}): {note}",
                "known_miss": ""
                if example.flags
                else f"no detector flagged it; a reviewer did ({reviewer}): {note}",
                "program": example.code,
                "task_version": version.version,
                "reviewer": reviewer,
                "trajectory": example.trajectory_id,
            }
        )
    return cases


def as_python(cases: list[dict]) -> str:
    """A module defining ``REVIEWED_HACKS``: ``Case`` rows to move into ``HACKS`` of corpus.py (a
    known miss needs the flag it should raise filled in). Cases whose code does not start with
    the task's prompt cannot be written as a completion and are listed in a comment."""
    lines = [
        '"""Reward hacks found by human review (written by `manage.py export_hack_corpus`).',
        "",
        (
            "Move these into HACKS of tests/training/hack_corpus/corpus.py; for a known miss, set "
            "the flag the"
        ),
        'detectors should have raised."""',
        "",
        "from tests.training.hack_corpus.corpus import Case",
        "",
        "REVIEWED_HACKS = [",
    ]
    skipped = []
    for case in cases:
        if case["completion"] is None:
            skipped.append(case["name"])
            continue
        args = [
            repr(case["name"]),
            repr(case["task_id"]),
            repr(case["completion"]),
            repr(tuple(case["flags"])),
            repr(case["note"]),
        ]
        if case["known_miss"]:
            args.append(f"known_miss={case['known_miss']!r}")
        lines.append(f"    Case({', '.join(args)}),")
    lines.append("]")
    if skipped:
        lines.append(
            f"# not written (the code does not start with the task's prompt): {', '.join(skipped)}"
        )
    return "\n".join(lines) + "\n"


class Command(BaseCommand):
    help = (
        "Export the reward hacks reviewers labelled (HackExample rows) in the hack regression "
        "corpus's format: a Python module of Case rows (--output FILE.py) or JSON lines with the "
        "same fields and the whole program (any other name)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", required=True, help="FILE.py (Case rows) or FILE.jsonl")
        parser.add_argument("--format", choices=["py", "jsonl"], help="default: from the file name")

    def handle(self, *args, output: str, format: str | None, **_):
        path = Path(output)
        kind = format or ("py" if path.suffix == ".py" else "jsonl")
        examples = HackExample.objects.select_related("task_version__task", "created_by").order_by(
            "id"
        )
        cases = corpus_cases(examples)
        if kind == "py":
            text = as_python(cases)
        else:
            text = "".join(json.dumps(case, sort_keys=True) + "\n" for case in cases)
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc}") from exc
        self.stdout.write(
            f"wrote {len(cases)} hack example{'s' if len(cases) != 1 else ''} to {path} ({kind})"
        )
