"""Shared fixtures: a real Redis (the embedded one unless REDIS_URL is set) and a HumanEval
slice."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from console.management.stack import Stack
from tasks_library.importers.humaneval import default_path
from tests.browser import csp_guard  # noqa: F401 (an autouse fixture of every browser test)


@pytest.fixture(scope="session", autouse=True)
def redis_service():
    """Redis (channel layer, Celery, the execution queue) and resident sandbox workers:
    used if running, else started for the session."""
    with Stack() as stack:
        stack.redis()
        stack.sandbox_workers("python")
        stack.sandbox_workers("node")
        yield


def humaneval_rows() -> list[dict]:
    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="session")
def humaneval() -> list[dict]:
    """The 164 HumanEval rows as the package ships them."""
    return humaneval_rows()


@pytest.fixture
def write_jsonl(tmp_path):
    """Write rows (dicts, or raw bytes lines) to a JSONL file and return its path."""

    def write(rows, name: str = "tasks.jsonl") -> Path:
        path = tmp_path / name
        with open(path, "wb") as handle:
            for row in rows:
                handle.write(row if isinstance(row, bytes) else json.dumps(row).encode())
                handle.write(b"\n")
        return path

    return write


DATABASE_FIXTURES = {"django_db_setup", "_django_db_helper"}


def pytest_addoption(parser):
    parser.addoption(
        "--database-only",
        action="store_true",
        help="run only the tests that use Django's database (marker django_db or a database "
        "fixture) or carry the marker postgresql: the PostgreSQL profile of .ci/run",
    )


def pytest_collection_modifyitems(config, items):
    """With ``--database-only``, deselect the tests that never open Django's database: they ran
    in the embedded profile and would run the same code again."""
    if not config.getoption("--database-only"):
        return
    keep, drop = [], []
    for item in items:
        uses_database = (
            item.get_closest_marker("django_db") is not None
            or item.get_closest_marker("postgresql") is not None
            or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        )
        (keep if uses_database else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
