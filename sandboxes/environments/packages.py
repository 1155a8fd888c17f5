"""Build an environment's packages layer: pip for Python, npm for Node.js.

Python: ``pip install --only-binary=:all: --target tree/site-packages`` with the exact pins
(``--require-hashes`` when the spec gives hashes), run by the worker's own pip: wheels only, so
nothing of any package runs (installing a wheel unpacks files; building an sdist runs the
project's ``setup.py`` or PEP 517 backend). An environment that allows source builds
(``source_builds``) has the whole install run in a sandbox instead
(:mod:`sandboxes.environments.source_build`), its network limited to the package registry. For a
runtime other than the host's Python (the Debian root's), pip installs for that interpreter by
tags (``--python-version``, ``--abi``, ``--platform manylinux..._x86_64``), so nothing of the
target interpreter has to run during the build. What was resolved (the pins and their
dependencies) is read back from pip's installation report.

Bytecode: sandboxes never write ``.pyc`` files (the store is read-only there, and
``PYTHONDONTWRITEBYTECODE`` is set), so a store without them recompiles every module it imports
in every grading (``import pandas``: 1.64 s instead of 0.45 s on this 2-core machine,
``benchmarks/environments.py``). A layer is compiled once when it is built
(:func:`compile_bytecode`): checked-hash pycs (PEP 552), the same bytes in every build of the
same files, validated against their source on import. It is compiled by the runtime's own
interpreter, whose magic number the pycs carry: the host's Python, or a Debian root's, started
on the host from the root's own loader and libraries (``debian.launcher``; Debian's signed
interpreter, from the layer below). Compiling only parses; no code of a package runs.

Node.js: the pins go into a ``package.json``; ``npm install --package-lock-only`` resolves the
lock file once, then ``npm ci`` installs exactly that lock (with its integrity hashes) into
``tree/node_modules``, lifecycle scripts off.

Failures are classified from the tool's own output into :class:`EnvironmentBuildError` kinds
(a missing package, a conflict, a bad hash, out of disk, a timeout), naming the package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from sandboxes.environments import debian
from sandboxes.environments.mount import PACKAGES_INSIDE, SITE_PACKAGES
from sandboxes.environments.source_build import install_in_sandbox
from sandboxes.environments.spec import HOST_PYTHON, EnvironmentSpec
from sandboxes.environments.steps import classify_failure, run_step, tail
from sandboxes.environments.store import EnvironmentBuildError
from sandboxes.interpreters import python_interpreter

BUILD_TIMEOUT_S = 900.0
# glibc of the Debian root (trixie: 2.41): manylinux wheels up to that are loadable there.
MANYLINUX_MAX_MINOR = 41


def target_tags(runtime: str) -> list[str]:
    """pip's options that install wheels for ``runtime`` when it is not the host's Python."""
    if runtime == HOST_PYTHON:
        return []
    minor = runtime.removeprefix("python3.")
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(MANYLINUX_MAX_MINOR, 16, -1)]
    options = ["--only-binary=:all:", "--python-version", f"3.{minor}"]
    options += ["--implementation", "cp", "--abi", f"cp3{minor}", "--abi", "abi3", "--abi", "none"]
    for platform in [*platforms, "manylinux2014_x86_64", "linux_x86_64", "any"]:
        options += ["--platform", platform]
    return options


def build_python(
    spec: EnvironmentSpec,
    tree: Path,
    *,
    lock: list[dict] | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
    root: Path | None = None,
) -> dict:
    """Install ``spec``'s pins into ``tree/site-packages``, then compile their bytecode.

    Args:
        lock: a previous build's ``resolved`` list (every package with its version and the
            sha256 of its file): installed exactly, ``--no-deps --require-hashes``, so an image
            built later gets the same files though the index has newer dependencies by then.
        root: the built root filesystem of a runtime that has one (its interpreter compiles
            the bytecode); None for the host's runtime.

    Returns:
        ``{"resolved": [{"name", "version", "sha256"}...], "log": str}``: what pip's
        installation report says it installed (the pins and their dependencies).

    Raises:
        EnvironmentBuildError: pip failed (kind and package say why).
    """
    target = tree / SITE_PACKAGES
    requirements = tree.parent / "requirements.txt"
    report = tree.parent / "pip-report.json"
    if lock:
        lines = [f"{p['name']}=={p['version']} --hash=sha256:{p['sha256']}" for p in lock]
    else:
        lines = [p.requirement_line() for p in spec.python_pins]
    options = []
    if lock:
        options += ["--no-deps", "--require-hashes"]
    elif spec.require_hashes:
        options.append("--require-hashes")
    if spec.source_builds:
        code, log = install_in_sandbox(lines, options, tree, timeout_s=timeout_s)
        if code != 0:
            raise classify_failure(f"pip install for {spec.runtime} (in a build sandbox)", log, log)
    else:
        requirements.write_text("".join(line + "\n" for line in lines))
        command = [sys.executable, "-m", "pip", "install", "--no-compile", "--target", str(target)]
        # --no-warn-conflicts: pip's after-install check compares the target with the packages
        # of the interpreter running pip, which no sandbox sees (conflicts among the pins
        # themselves still fail the resolution).
        command += ["--no-warn-script-location", "--no-warn-conflicts"]
        command += ["--report", str(report), "-r", str(requirements), *options]
        command += target_tags(spec.runtime) or ["--only-binary=:all:"]
        log = run_step(command, timeout_s=timeout_s, what=f"pip install for {spec.runtime}")
    try:
        installed = json.loads(report.read_text())["install"]
        resolved = [
            {
                "name": item["metadata"]["name"],
                "version": item["metadata"]["version"],
                "sha256": item["download_info"]
                .get("archive_info", {})
                .get("hashes", {})
                .get("sha256", ""),
            }
            for item in installed
        ]
    except (OSError, ValueError, KeyError) as exc:
        raise EnvironmentBuildError(
            f"pip's installation report could not be read: {exc}", log=tail(log)
        ) from exc
    # pip's own bookkeeping differs from build to build (the installer's paths; REQUESTED marks
    # what was named on the command line, which a lock names all of); nothing in a sandbox
    # reads it.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for name in ("RECORD", "direct_url.json", "REQUESTED"):
        for path in target.glob(f"*.dist-info/{name}"):
            path.unlink()
    interpreter = bytecode_interpreter(spec.runtime, root)
    if interpreter:
        log += compile_bytecode(target, interpreter=interpreter, timeout_s=timeout_s)
    return {"resolved": sorted(resolved, key=lambda r: r["name"].lower()), "log": tail(log)}


# Run as ``python -I -S -c``: nothing of the tree is importable while it compiles. A module that
# does not compile (Python 2 leftovers, templates named .py) is left without a pyc, as pip does.
# workers: 0 for one process per core; 1 (in this process) for a root's interpreter, whose
# worker processes would start from sys.executable without the root's loader and libraries.
COMPILE = """
import compileall, py_compile, sys
target, inside, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
compileall.compile_dir(
    target, quiet=2, workers=workers, stripdir=target, prependdir=inside,
    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
)
"""


def bytecode_interpreter(runtime: str, root: Path | None) -> list[str] | None:
    """The argv prefix that runs ``runtime``'s interpreter on the host: the host's Python, or a
    Debian root's through the root's loader; None for a runtime with neither here (its layer
    stays source only)."""
    if runtime == HOST_PYTHON:
        return [python_interpreter()]
    if root is not None and debian.root_spec(runtime):
        return debian.launcher(root, runtime)
    return None


def compile_bytecode(
    target: Path, *, interpreter: list[str], timeout_s: float = BUILD_TIMEOUT_S
) -> str:
    """Write checked-hash ``.pyc`` files (PEP 552) beside every module under ``target`` (a
    packages layer's ``site-packages``), with ``interpreter`` (the argv prefix of the Python
    sandboxes run: :func:`bytecode_interpreter`), each code object naming its source where a
    sandbox sees it (``/env/site-packages/...``), so two builds of the same files write the
    same bytes.

    Returns:
        the step's log line.

    Raises:
        EnvironmentBuildError: (``timeout``) compiling took longer than ``timeout_s`` seconds;
            the interpreter exited non-zero.
    """
    inside = f"{PACKAGES_INSIDE}/{SITE_PACKAGES}"
    workers = "0" if interpreter == [python_interpreter()] else "1"
    command = [*interpreter, "-I", "-S", "-c", COMPILE, str(target), inside, workers]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentBuildError(
            f"compiling the packages' bytecode took more than {timeout_s:.0f} s",
            kind="timeout",
        ) from None
    if done.returncode != 0:  # the interpreter itself failed (a module that fails is skipped)
        raise EnvironmentBuildError(
            "compiling the packages' bytecode failed",
            log=tail(done.stderr.decode("utf-8", "replace")),
        )
    compiled = sum(1 for _ in target.rglob("*.pyc"))
    return f"\n$ compileall --invalidation-mode checked-hash: {compiled} modules\n"


def build_node(spec: EnvironmentSpec, tree: Path, *, timeout_s: float = BUILD_TIMEOUT_S) -> dict:
    """Install ``spec``'s npm pins into ``tree/node_modules`` through a lock file and ``npm ci``.

    Raises:
        EnvironmentBuildError: npm failed, or is not installed.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise EnvironmentBuildError(
            "npm is not installed on this machine; install Node.js with npm to build Node packages",
            kind="runtime_unavailable",
        )
    dependencies = dict(pin.rsplit("@", 1) for pin in spec.npm_pins)
    manifest = {"name": "crucible-environment", "private": True, "dependencies": dependencies}
    (tree / "package.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    quiet = ["--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier"]
    log = run_step(
        [npm, "install", "--package-lock-only", *quiet],
        timeout_s=timeout_s,
        what="npm install --package-lock-only",
        cwd=tree,
    )
    log += run_step([npm, "ci", *quiet], timeout_s=timeout_s, what="npm ci", cwd=tree)
    lock = json.loads((tree / "package-lock.json").read_text())
    resolved = [
        {"name": path.removeprefix("node_modules/"), "version": info.get("version", "")}
        for path, info in sorted(lock.get("packages", {}).items())
        if path
    ]
    return {"resolved": resolved, "log": tail(log)}
