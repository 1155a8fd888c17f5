"""Every inline script of every template carries the response's CSP nonce (the policy has no
'unsafe-inline' for scripts: a script without it never runs, as the environment page's live
build once did not). Data blocks (``json_script``, ``type="application/json"``) run nothing and
need none."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)


def templates() -> list[Path]:
    return [
        path
        for folder in ("console", "tasks_library")
        for path in sorted((ROOT / folder).rglob("templates/**/*.html"))
    ]


def test_every_inline_script_has_the_nonce():
    assert len(templates()) > 30
    missing = []
    for path in templates():
        for match in SCRIPT.finditer(path.read_text()):
            attributes = match.group(1)
            if "src=" in attributes or "application/json" in attributes:
                continue
            if 'nonce="{{ request.csp_nonce }}"' not in attributes:
                line = path.read_text()[: match.start()].count("\n") + 1
                missing.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    assert missing == []
