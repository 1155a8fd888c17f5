"""Which installed modules a sandbox image lacks: the venv here minus the closure of the
requirements the sandbox Dockerfiles install (deploy/docker/filter_requirements.py).

:func:`blocked_modules` lists the top-level modules of every installed distribution outside
that closure; ``python blocked_run.py MODULES_FILE manage.py ...`` (``tests/deploy/blocked_run.py``)
makes them unimportable and runs the command, so a test sees what the image would.
"""

from __future__ import annotations

import importlib.metadata as md
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "docker"))
import filter_requirements  # noqa: E402 (found on deploy/docker, put on the path just above)

EXCLUDE_FILE = ROOT / "deploy" / "docker" / "sandbox-requirements-exclude.txt"


def sandbox_requirements() -> list[str]:
    """The requirement lines the sandbox images install."""
    excluded = filter_requirements.excluded_names(EXCLUDE_FILE.read_text())
    return filter_requirements.kept((ROOT / "requirements.txt").read_text(), excluded)


def _installed() -> dict[str, md.Distribution]:
    return {filter_requirements.canonical(d.metadata["Name"]): d for d in md.distributions()}


def closure(lines: list[str]) -> set[str]:
    """Canonical names of the distributions ``lines`` install, with their dependencies (markers
    evaluated for this interpreter, extras followed), as resolved by what is installed here."""
    installed = _installed()
    environment = default_environment()
    todo = [(Requirement(line), "") for line in lines]
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate(
            {**environment, "extra": extra}
        ):
            continue
        name = filter_requirements.canonical(requirement.name)
        for wanted in [""] + sorted(requirement.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            names.add(name)
            dist = installed.get(name)
            if dist is None:
                continue  # not installed here (a marker this interpreter does not meet)
            todo.extend((Requirement(raw), wanted) for raw in dist.requires or [])
    return names


def _top_level(dist: md.Distribution) -> set[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    modules = set()
    for file in dist.files or []:
        parts = file.parts
        if (
            not parts
            or parts[0].endswith((".dist-info", ".data"))
            or parts[0] in ("..", "bin", "__pycache__")
        ):
            continue
        top = parts[0]
        if top.endswith(".py"):
            modules.add(top[:-3])
        elif len(parts) > 1 and not top.endswith(".pth"):
            modules.add(top)
        elif top.endswith(".so"):
            modules.add(top.split(".")[0])
    return modules


def blocked_modules() -> tuple[set[str], set[str]]:
    """``(modules, distributions)``: the top-level modules that only distributions outside the
    sandbox image's closure provide, and those distributions' names."""
    keep = closure(sandbox_requirements())
    installed = _installed()
    outside = {
        name
        for name in installed
        if name not in keep and name not in ("pip", "setuptools", "wheel")
    }
    kept_modules = set().union(*(_top_level(installed[n]) for n in keep if n in installed))
    modules = set().union(*(_top_level(installed[n]) for n in outside)) - kept_modules
    return {m for m in modules if m and not m.startswith("_")} | {
        m for m in modules if m.startswith("_") and len(m) > 1
    }, outside
