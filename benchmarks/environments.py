"""Environments: the cold build, the cache hit, the first mount's verification, against the peer
that keeps no store (a fresh ``python -m venv`` and ``pip install`` of the same pins per use,
what a sandbox without a content-addressed store pays every time).

In a store of its own (a temporary directory, removed at the end):

* ``packages``: the data-analysis pins (numpy, pandas) for the host's Python: a cold build
  (pip into the store, manifest, atomic publish), a second build of the same spec (a cache hit),
  and the first mount's verification (every file re-hashed against the manifest);
* ``root`` (``--root``): the Debian trixie root of runtime ``python3.13`` by debootstrap, cold
  and then a cache hit (needs root and the network; tens of seconds);
* ``peer``: ``python -m venv`` plus ``pip install`` of the same pins into a fresh directory.

pip's own download cache is left as the user has it (both sides use it alike): a cold build here
is "not in the store", not "not downloaded". Prints JSON. Run: ``.venv/bin/python
benchmarks/environments.py [--packages P ...] [--root]``; ``--quick`` (what CI runs): one small
pure-Python package, no root.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import HOST_PYTHON, parse
from sandboxes.environments.store import EnvironmentStore

DATA_PACKAGES = ["numpy==2.4.6", "pandas==3.1.1"]


def _timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    outcome = action()
    return round(time.perf_counter() - started, 4), outcome


def packages_case(store: EnvironmentStore, packages: list[str]) -> dict:
    """Cold build, cache hit and first-mount verification of ``packages`` on the host Python."""
    spec = parse(HOST_PYTHON, packages)
    cold_s, cold = _timed(lambda: materialise(spec, environment_store=store))
    hit_s, hit = _timed(lambda: materialise(spec, environment_store=store))
    fresh = EnvironmentStore(store.root)  # a worker that has not mounted it yet
    verify_s, _ = _timed(lambda: fresh.verify(cold.packages.hash))
    return {
        "packages": packages,
        "cold_build_s": cold_s,
        "cache_hit_s": hit_s,
        "verify_s": verify_s,
        "first_build_was_cache_hit": cold.cache_hit,
        "second_build_was_cache_hit": hit.cache_hit,
        "size_bytes": cold.packages.record["size_bytes"],
        "files": cold.packages.record["files"],
        "resolved": len(cold.packages.record["resolved"]),
    }


def root_case(store: EnvironmentStore) -> dict:
    """Cold build and cache hit of the python3.13 Debian root."""
    spec = parse("python3.13", [])
    cold_s, cold = _timed(lambda: materialise(spec, environment_store=store))
    hit_s, hit = _timed(lambda: materialise(spec, environment_store=store))
    return {
        "cold_build_s": cold_s,
        "cache_hit_s": hit_s,
        "second_build_was_cache_hit": hit.cache_hit,
        "size_bytes": cold.root.record["size_bytes"],
        "files": cold.root.record["files"],
        "debian_packages": len(cold.root.record["resolved"]),
    }


def peer_case(work: Path, packages: list[str]) -> dict:
    """A fresh venv and ``pip install`` of the same pins (no store, no reuse)."""
    venv = work / "peer-venv"

    def install() -> None:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *packages],
            check=True,
            env={"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PATH": "/usr/bin:/bin"},
        )

    seconds, _ = _timed(install)
    return {"venv_install_s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", nargs="+", default=DATA_PACKAGES)
    parser.add_argument("--root", action="store_true", help="also the python3.13 Debian root")
    args = common.parse_args(parser, quick={"packages": ["six==1.17.0"]})
    work = Path(tempfile.mkdtemp(prefix="crucible-bench-env-"))
    try:
        store = EnvironmentStore(work / "store")
        result = {"quick": args.quick, "packages": packages_case(store, args.packages)}
        result["peer"] = peer_case(work, args.packages)
        result["ratio_peer_over_cache_hit"] = round(
            result["peer"]["venv_install_s"] / max(result["packages"]["cache_hit_s"], 1e-6), 1
        )
        result["ratio_peer_over_cold_build"] = round(
            result["peer"]["venv_install_s"] / max(result["packages"]["cold_build_s"], 1e-6), 3
        )
        if args.root:
            result["root"] = root_case(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
