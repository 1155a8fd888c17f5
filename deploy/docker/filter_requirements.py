"""Print requirements.txt without the distributions an exclusion file names (PEP 503 names).

    python filter_requirements.py requirements.txt sandbox-requirements-exclude.txt > sandbox.txt

The sandbox images install what this prints; tests/deploy imports :func:`kept` to check the
same set. Standard library only: it runs in the image before anything is installed.
"""

from __future__ import annotations

import re
import sys

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503's normalised name: ``Django`` -> ``django``, ``channels_redis`` ->
    ``channels-redis``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def excluded_names(text: str) -> set[str]:
    """The canonical names of an exclusion file (one a line; ``#`` comments and blanks skipped)."""
    return {
        canonical(line.strip())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }


def kept(requirements: str, excluded: set[str]) -> list[str]:
    """The lines of ``requirements`` whose distribution is not in ``excluded``; comments and
    option lines (``-r``, ``--index-url``) are dropped."""
    lines = []
    for line in requirements.splitlines():
        match = _NAME.match(line)
        if match and canonical(match.group(1)) not in excluded:
            lines.append(line.strip())
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: filter_requirements.py REQUIREMENTS EXCLUDE\n")
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        requirements = handle.read()
    with open(argv[2], encoding="utf-8") as handle:
        excluded = excluded_names(handle.read())
    sys.stdout.write("".join(line + "\n" for line in kept(requirements, excluded)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
