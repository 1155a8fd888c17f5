"""The console's front-end build: which static files Django serves, and ``npm run build`` when due.

The console's page scripts (``frontend/console/*.js``) are ES modules; those that draw charts
``import Plotly from "plotly.js-dist-min"``. They reach the browser one of two ways:

* **bundled** (the normal case): ``npm ci && npm run build`` in ``frontend/``
  (``frontend/build.mjs``, esbuild) bundles them with plotly.js from npm, pinned in
  ``frontend/package-lock.json``, into ``frontend/dist/``; Django's staticfiles serve that folder
  alone. ``./crucible up`` and ``./crucible test`` build first (:func:`ensure_build`) when the build
  is missing or stale and ``npm`` is on the PATH.
* **unbundled** (no Node on this machine, or ``CRUCIBLE_FRONTEND_BUILD=false``): the sources are
  served as they are, the plotly wheel's ``package_data`` as ``static/plotly/``, and every page
  carries an import map (``{% frontend_importmap %}``) that resolves ``plotly.js-dist-min`` to
  ``frontend/fallback/plotly.js``, which runs the wheel's ``plotly.min.js``. That file is byte for
  byte the npm package's of the pinned version (``tests/console/test_frontend_build.py`` keeps the
  two pins equal), so both ways serve the same plotly.js.

A build is current when ``dist/build-info.json`` lists the SHA-256 of exactly today's inputs (every
file under ``frontend/console/`` plus :data:`BUILD_FILES`): an edited, added or deleted source makes
it stale, and a stale build is never served; the sources are.

Run as a script with any Python 3.9+ (stdlib only: ``./crucible`` runs it before the virtualenv
exists)::

    # build when due and npm is present, else say why not (exit 0)
    python3 core/frontend.py ensure
    # "current", or why not; exit status 0 only when current
    python3 core/frontend.py status
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"
# Besides every file under frontend/console/: a change to these calls for a new build
# (frontend/build.mjs hashes the same list).
BUILD_FILES = ("package.json", "package-lock.json", "build.mjs")
PLOTLY_PACKAGE = "plotly.js-dist-min"


def build_dir(frontend: Path = FRONTEND) -> Path:
    return frontend / "dist"


def build_inputs(frontend: Path = FRONTEND) -> dict[str, str]:
    """``{path relative to frontend/ (posix): SHA-256 hex}`` of the build's inputs today."""
    paths = [p for p in (frontend / "console").rglob("*") if p.is_file()]
    paths += [frontend / name for name in BUILD_FILES if (frontend / name).is_file()]
    return {
        p.relative_to(frontend).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(paths)
    }


def build_info(frontend: Path = FRONTEND) -> dict | None:
    """``dist/build-info.json`` as written by ``frontend/build.mjs`` (keys ``plotly_js``,
    ``esbuild``, ``plotly_chunk``, ``entries``, ``inputs``), or None when there is no readable
    one."""
    try:
        return json.loads((build_dir(frontend) / "build-info.json").read_text())
    except (OSError, ValueError):
        return None


def build_outdated(frontend: Path = FRONTEND) -> str | None:
    """None when ``frontend/dist`` is a build of today's inputs, else why not (one line)."""
    info = build_info(frontend)
    if info is None:
        return "frontend/dist has no build (no build-info.json)"
    built, now = info.get("inputs") or {}, build_inputs(frontend)
    changed = sorted(name for name in built.keys() | now.keys() if built.get(name) != now.get(name))
    if changed:
        shown = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        return f"frontend/dist is stale: {shown} changed since it was built"
    return None


def npm_pin(frontend: Path = FRONTEND) -> str:
    """The plotly.js version ``frontend/package.json`` pins (exact).

    Raises:
        ValueError: package.json does not pin ``plotly.js-dist-min`` to one exact version.
    """
    spec = (
        json.loads((frontend / "package.json").read_text())
        .get("devDependencies", {})
        .get(PLOTLY_PACKAGE, "")
    )
    if not spec or not spec[0].isdigit():
        raise ValueError(
            f"frontend/package.json must pin {PLOTLY_PACKAGE} to an exact version, not {spec!r}"
        )
    return spec


def wheel_plotly_dir() -> Path:
    """The plotly wheel's ``package_data`` folder (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the plotly package is not installed: pip install -r requirements.txt"
        )
    return Path(spec.origin).parent / "package_data"


def plotly_js_version(path: Path) -> str:
    """The version in a plotly.js bundle's banner (``* plotly.js v4.1.1``).

    Raises:
        ValueError: the file's first 512 bytes carry no such banner.
    """
    head = path.read_bytes()[:512].decode("utf-8", "replace")
    marker = "plotly.js v"
    at = head.find(marker)
    if at < 0:
        raise ValueError(f"{path}: no 'plotly.js vX.Y.Z' banner at the top")
    return head[at + len(marker) :].split()[0]


def staticfiles_dirs(*, bundled: bool, frontend: Path = FRONTEND) -> list:
    """``STATICFILES_DIRS`` for the bundled build or the unbundled sources (see the module
    docstring). Neither lists ``frontend/`` itself, which holds node_modules."""
    if bundled:
        return [build_dir(frontend)]
    return [
        ("console", frontend / "console"),
        ("fallback", frontend / "fallback"),
        ("plotly", wheel_plotly_dir()),
    ]


@contextlib.contextmanager
def _build_lock(frontend: Path):
    """One build at a time per checkout (two test sessions, or ``up`` beside ``test``)."""
    with open(frontend / ".build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _modules_outdated(frontend: Path) -> bool:
    """npm writes node_modules/.package-lock.json on every install: older than the lockfile, or
    missing, means node_modules is not the locked set."""
    hidden = frontend / "node_modules" / ".package-lock.json"
    return (
        not hidden.exists()
        or hidden.stat().st_mtime < (frontend / "package-lock.json").stat().st_mtime
    )


def ensure_build(frontend: Path = FRONTEND, *, say=None) -> bool:
    """Bring ``frontend/dist`` up to date: ``npm ci`` when node_modules is not the locked set, then
    ``npm run build``, when the build is missing or stale and ``npm`` is on the PATH. True when the
    build is current afterwards. Otherwise ``say`` (default: print to stderr) gets one line saying
    why and that the unbundled sources and the plotly wheel's plotly.js are served instead; npm's
    own output goes to stderr."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    if build_outdated(frontend) is None:
        return True
    fallback = (
        f"serving the unbundled console scripts and plotly.js {_wheel_version_or_pin(frontend)} "
        "from the plotly wheel"
    )
    npm = shutil.which("npm")
    if npm is None:
        say(
            "front-end build skipped (npm not found; install Node.js 18+ and npm to bundle): "
            f"{fallback}"
        )
        return False
    with _build_lock(frontend):
        why = build_outdated(frontend)  # another process may have built while this one waited
        if why is None:
            return True
        say(f"front-end build: {why}; running npm")
        steps = (
            [[npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]]
            if _modules_outdated(frontend)
            else []
        )
        steps.append([npm, "run", "--silent", "build"])
        for step in steps:
            done = subprocess.run(
                step,
                cwd=frontend,
                stdout=sys.stderr,
                stderr=sys.stderr,
                env={**os.environ, "npm_config_update_notifier": "false"},
            )
            if done.returncode != 0:
                say(
                    f"front-end build failed ({' '.join(step[1:3])} exited {done.returncode}): "
                    f"{fallback}"
                )
                return False
    why = build_outdated(frontend)
    if why is not None:
        say(f"front-end build did not take ({why}): {fallback}")
    return why is None


def _wheel_version_or_pin(frontend: Path) -> str:
    try:
        return plotly_js_version(wheel_plotly_dir() / "plotly.min.js")
    except (ModuleNotFoundError, OSError, ValueError):
        return npm_pin(frontend)  # the venv is not there yet; the test keeps the two equal


def main(argv: list[str]) -> int:
    if argv == ["ensure"]:
        ensure_build()
        return 0
    if argv == ["status"]:
        why = build_outdated()
        print(why or "current")
        return 0 if why is None else 1
    print("usage: python3 core/frontend.py ensure | status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
