"""Environments: the cold build, the cache hit, the first mount's verification and the import
time of what was built, each against the peer a user would reach for, on the same clock.

In stores of its own (temporary directories, removed at the end), ``--repeats`` rounds
(default 3), Crucible's and the peer's cases alternating inside each round:

* ``cold``: Crucible builds the pins for the host's Python into an empty store (pip
  ``--only-binary=:all: --target``, the manifest, checked-hash bytecode, atomic publish); the
  peer makes a venv without pip (``python -m venv --without-pip``) and installs the same pins into
  it with the same pip (``pip --python VENV``, so that pip checks the fresh venv's packages, as a
  venv's own pip would, not this project's) and the same flags (``--only-binary=:all:``; pip
  byte-compiles by default, as Crucible now does). ``peer_with_ensurepip`` also times what a
  plain ``python -m venv`` plus that venv's own ``pip install`` pays (``ensurepip`` included),
  labelled as such;
* ``hit``: a second build of the same spec (Crucible's cache hit: the lock and manifest read)
  against a cached venv reused the way tox and nox reuse one (its requirements marker read and
  compared);
* ``verify``: a worker's first mount (every file re-hashed against the manifest; no peer);
* ``import``: ``python -I -S -B -c "import <last pin>"`` on the built site-packages, with its
  bytecode and with the same tree stripped of it (what every grading paid before the store held
  bytecode: sandboxes never write .pyc files).

Each figure is the median of the rounds, with its minimum and maximum. pip's own download cache
is left as the user has it (both sides use it alike): a cold build here is "not in the store",
not "not downloaded". ``--root`` adds the python3.13 Debian root (debootstrap: needs root and the
network), the same packages built on it (their bytecode compiled by the root's interpreter) and
the import through that interpreter, with and without the bytecode. Prints JSON. Run:
``.venv/bin/python benchmarks/environments.py [--packages P ...] [--root] [--repeats N]``;
``--quick`` (what CI runs): one small pure-Python package, 2 rounds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from sandboxes.environments import debian
from sandboxes.environments.build import materialise
from sandboxes.environments.mount import SITE_PACKAGES
from sandboxes.environments.spec import HOST_PYTHON, parse
from sandboxes.environments.store import EnvironmentStore

DATA_PACKAGES = ["numpy==2.4.6", "pandas==3.1.1"]


def _timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    outcome = action()
    return round(time.perf_counter() - started, 6), outcome


PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _pip_install(pip_python: str, venv: Path, packages: list[str]) -> None:
    """``pip install --only-binary=:all:`` of ``packages`` into ``venv``, run by the pip of
    ``pip_python`` (``--python``: pip inspects the fresh venv, not the interpreter running it)."""
    subprocess.run(
        [pip_python, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet"]
        + ["--only-binary=:all:", *packages],
        check=True,
        env={**os.environ, **PIP_ENV},
    )


def peer_cold(work: Path, packages: list[str]) -> Path:
    """A venv without pip, the same pins installed into it by the same pip with the same flags
    (byte-compiled: pip's default). Returns the venv."""
    venv = Path(tempfile.mkdtemp(dir=work, prefix="peer-"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    _pip_install(sys.executable, venv, packages)
    (venv / "requirements.marker").write_text("\n".join(sorted(packages)))
    return venv


def peer_with_ensurepip(work: Path, packages: list[str]) -> None:
    """What a plain ``python -m venv`` and that venv's own pip pay (ensurepip included)."""
    venv = Path(tempfile.mkdtemp(dir=work, prefix="peer-pip-"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip_install(str(venv / "bin" / "python"), venv, packages)


def peer_hit(venv: Path, packages: list[str]) -> bool:
    """A cached venv reused as tox and nox reuse one: its requirements marker read and compared."""
    marker = venv / "requirements.marker"
    return marker.is_file() and marker.read_text() == "\n".join(sorted(packages))


def import_seconds(site: Path, module: str, interpreter: list[str] | None = None) -> float:
    """Wall seconds of ``python -I -S -B -c "import module"`` with ``site`` first on the path
    (``-S``: this project's own site-packages, which may hold the same package, stay out), by
    ``interpreter`` (an argv prefix; default this Python)."""
    program = (
        f"import sys; sys.path.insert(0, {str(site)!r}); import {module}; "
        f"assert {module}.__file__.startswith({str(site)!r}), {module}.__file__"
    )
    argv = [*(interpreter or [sys.executable]), "-I", "-S", "-B", "-c", program]
    seconds, _ = _timed(lambda: subprocess.run(argv, check=True))
    return seconds


def without_bytecode(site: Path, work: Path) -> Path:
    """A copy of ``site`` with every ``__pycache__`` left out."""
    copy = Path(tempfile.mkdtemp(dir=work, prefix="source-only-")) / "site-packages"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def module_of(requirement: str) -> str:
    """The top-level module of a pin, where it differs from its name."""
    name = requirement.split("==")[0].strip().lower().replace("-", "_")
    return {"pyyaml": "yaml", "scikit_learn": "sklearn", "pillow": "PIL"}.get(name, name)


def packages_rounds(work: Path, packages: list[str], repeats: int) -> dict:
    """``repeats`` rounds of cold, hit, verify and import, Crucible's and the peer's cases
    alternating (which goes first alternates too)."""
    spec = parse(HOST_PYTHON, packages)
    times: dict[str, list[float]] = {
        k: []
        for k in (
            "cold_build_s",
            "cache_hit_s",
            "verify_s",
            "peer_cold_s",
            "peer_hit_s",
            "peer_with_ensurepip_s",
            "import_with_bytecode_s",
            "import_source_only_s",
        )
    }
    record: dict = {}
    module = module_of(packages[-1])
    for round_index in range(repeats):
        store = EnvironmentStore(Path(tempfile.mkdtemp(dir=work, prefix="store-")))

        def crucible(store: EnvironmentStore = store) -> None:
            cold_s, cold = _timed(lambda: materialise(spec, environment_store=store))
            hit_s, hit = _timed(lambda: materialise(spec, environment_store=store))
            verify_s, _ = _timed(lambda: EnvironmentStore(store.root).verify(cold.packages.hash))
            times["cold_build_s"].append(cold_s)
            times["cache_hit_s"].append(hit_s)
            times["verify_s"].append(verify_s)
            record.update(
                first_build_was_cache_hit=cold.cache_hit,
                second_build_was_cache_hit=hit.cache_hit,
                size_bytes=cold.packages.record["size_bytes"],
                files=cold.packages.record["files"],
                resolved=len(cold.packages.record["resolved"]),
                site=cold.packages.tree / SITE_PACKAGES,
            )

        def peer() -> None:
            cold_s, venv = _timed(lambda: peer_cold(work, packages))
            hit_s, hit = _timed(lambda: peer_hit(venv, packages))
            assert hit, "the cached venv's marker did not match"
            times["peer_cold_s"].append(cold_s)
            times["peer_hit_s"].append(hit_s)
            seconds, _ = _timed(lambda: peer_with_ensurepip(work, packages))
            times["peer_with_ensurepip_s"].append(seconds)

        for side in common.alternating(round_index, (crucible, peer)):
            side()
        site = record["site"]
        trees = [
            ("import_with_bytecode_s", site),
            ("import_source_only_s", without_bytecode(site, work)),
        ]
        for name, tree in common.alternating(round_index, trees):
            times[name].append(import_seconds(tree, module))
    record.pop("site")
    return {"packages": packages, "module": module, **record} | {
        name: common.spread(values) for name, values in times.items()
    }


def root_case(store: EnvironmentStore, work: Path, packages: list[str], repeats: int) -> dict:
    """Cold build and cache hit of the python3.13 Debian root; then ``packages`` built on it
    (bytecode by the root's interpreter included) and the last pin imported by that interpreter,
    with the layer's bytecode and from source only, ``repeats`` times alternating."""
    spec = parse("python3.13", [])
    cold_s, cold = _timed(lambda: materialise(spec, environment_store=store))
    hit_s, hit = _timed(lambda: materialise(spec, environment_store=store))
    layer_s, layer = _timed(
        lambda: materialise(parse("python3.13", packages), environment_store=store)
    )
    site = layer.packages.tree / SITE_PACKAGES
    interpreter = debian.launcher(cold.root.tree, "python3.13")
    module = module_of(packages[-1])
    times: dict[str, list[float]] = {"import_with_bytecode_s": [], "import_source_only_s": []}
    trees = [
        ("import_with_bytecode_s", site),
        ("import_source_only_s", without_bytecode(site, work)),
    ]
    for round_index in range(repeats):
        for name, tree in common.alternating(round_index, trees):
            times[name].append(import_seconds(tree, module, interpreter))
    imports = {name: common.spread(values) for name, values in times.items()}
    return {
        "cold_build_s": cold_s,
        "cache_hit_s": hit_s,
        "second_build_was_cache_hit": hit.cache_hit,
        "size_bytes": cold.root.record["size_bytes"],
        "files": cold.root.record["files"],
        "debian_packages": len(cold.root.record["resolved"]),
        "packages": packages,
        "packages_cold_build_s": layer_s,
        "pycs": sum(1 for _ in site.rglob("*.pyc")),
        **imports,
        "ratio_import_source_only_over_with_bytecode": _ratio(
            imports["import_source_only_s"], imports["import_with_bytecode_s"], 2
        ),
    }


def _ratio(numerator: dict, denominator: dict, digits: int) -> float:
    return round(numerator["median"] / max(denominator["median"], 1e-6), digits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", nargs="+", default=DATA_PACKAGES)
    parser.add_argument("--root", action="store_true", help="also the python3.13 Debian root")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default 3)")
    args = common.parse_args(parser, quick={"packages": ["six==1.17.0"], "repeats": 2})
    work = Path(tempfile.mkdtemp(prefix="crucible-bench-env-"))
    try:
        packages = packages_rounds(work, args.packages, args.repeats)
        result = {
            "quick": args.quick,
            "peer": {
                "name": "venv --without-pip + pip --python VENV install --only-binary=:all: (same "
                "pip, same flags); cached venv reused by its requirements marker (tox/nox style)",
                "pip": importlib.metadata.version("pip"),
                "python": platform.python_version(),
            },
            "packages": packages,
            # cold against cold, same pip and flags: above 1, Crucible's cold build is faster
            "ratio_peer_cold_over_cold_build": _ratio(
                packages["peer_cold_s"], packages["cold_build_s"], 3
            ),
            # a cache hit against a cached venv's check (both tiny; the store also reads the lock)
            "ratio_peer_hit_over_cache_hit": _ratio(
                packages["peer_hit_s"], packages["cache_hit_s"], 5
            ),
            # what the store's bytecode saves each grading that imports the last pin
            "ratio_import_source_only_over_with_bytecode": _ratio(
                packages["import_source_only_s"], packages["import_with_bytecode_s"], 2
            ),
        }
        if args.root:
            result["root"] = root_case(
                EnvironmentStore(work / "root-store"), work, args.packages, args.repeats
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
