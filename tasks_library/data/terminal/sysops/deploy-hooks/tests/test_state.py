"""run-deploy, on a fresh copy of the release, runs hooks 10-50 in order and never 90; the hooks'
commands and run-deploy are unchanged."""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

HOOKS = Path("/app/deploy/hooks.d")
PRISTINE = Path("/tests/pristine")
RELEASE = Path("/srv/release")
RUN = ["10-check-env", "20-render-config", "30-migrate", "40-warm-cache", "50-notify"]
SOURCE = {"30-migrate": "30-migrate.sh"}  # the pristine file each hook comes from


def commands(data: bytes) -> list[str]:
    """A hook's commands: its lines without line-ending style, comments or the #! line."""
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    return [x.rstrip() for x in lines if x.strip() and not x.lstrip().startswith("#")]


def test_run_deploy_untouched():
    live = hashlib.sha256(Path("/app/deploy/run-deploy").read_bytes()).hexdigest()
    assert live == hashlib.sha256((PRISTINE / "deploy/run-deploy").read_bytes()).hexdigest()


def test_hook_files():
    assert sorted(p.name for p in HOOKS.iterdir()) == sorted(RUN + ["90-reset-database", "README"])
    for name in RUN + ["90-reset-database", "README"]:
        live = (HOOKS / name).read_bytes()
        pristine = (PRISTINE / "deploy/hooks.d" / SOURCE.get(name, name)).read_bytes()
        assert commands(live) == commands(pristine), f"{name}: its commands changed"


def test_modes_and_interpreters():
    for name in RUN:
        path = HOOKS / name
        assert os.access(path, os.X_OK), f"{name} is not executable"
        first = path.read_bytes().split(b"\n", 1)[0]
        assert first in (
            b"#!/bin/sh",
            b"#!/bin/bash",
            b"#!/usr/bin/env bash",
            b"#!/usr/bin/env sh",
        ), name
        assert b"\r" not in path.read_bytes(), name
    for name in ("90-reset-database", "README"):
        assert not os.access(HOOKS / name, os.X_OK), f"{name} is executable"
    listed = subprocess.run(["run-parts", "--test", str(HOOKS)], capture_output=True, text=True)
    assert listed.stdout.split() == [str(HOOKS / n) for n in RUN]


def test_deploy_runs():
    for p in RELEASE.iterdir():  # /srv/release itself belongs to the task; its content is reset
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    shutil.copytree(PRISTINE / "release", RELEASE, dirs_exist_ok=True)
    r = subprocess.run(
        ["/app/deploy/run-deploy"],
        cwd=tempfile.mkdtemp(),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert r.returncode == 0, r.stderr[-800:]
    log = (RELEASE / "deploy.log").read_text().splitlines()
    assert log == ["deploy 2.14.0 start"] + [f"{n} ok" for n in RUN] + ["deploy 2.14.0 done"]
    assert (RELEASE / "config/app.ini").read_text() == (
        "[app]\nversion = 2.14.0\ndata_dir = /srv/release/data\nworkers = 4\n"
    )
    con = sqlite3.connect(RELEASE / "data/app.db")
    old = sqlite3.connect(f"file:{PRISTINE / 'release/data/app.db'}?mode=ro&immutable=1", uri=True)
    want = [
        (s, n, round(p * 100))
        for s, n, p in old.execute("SELECT sku, name, price FROM products ORDER BY sku")
    ]
    got = con.execute("SELECT sku, name, price_cents FROM products ORDER BY sku").fetchall()
    assert got == want
    index = "SELECT name FROM sqlite_master WHERE type='index' AND name='products_by_name'"
    assert con.execute(index).fetchone()
    cache = json.loads((RELEASE / "cache/products.json").read_text())
    assert [(c["sku"], c["name"], c["price_cents"]) for c in cache] == want
    assert (RELEASE / "DEPLOYED").read_text().strip() == "2.14.0"
