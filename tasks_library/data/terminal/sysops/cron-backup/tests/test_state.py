"""The crontab's two jobs are scheduled as the policy says and, run the way cron runs them,
back up the live database and apply the retention policy."""

import datetime
import gzip
import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

CRONTAB = Path("/app/cron/backup.crontab")
PRISTINE = Path("/tests/pristine")
BACKUPS = Path("/srv/backups")
DB = Path("/srv/orders/orders.db")

MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DAYS = "sun mon tue wed thu fri sat".split()
FIELDS = [(0, 59, None), (0, 23, None), (1, 31, None), (1, 12, MONTHS), (0, 7, DAYS)]
SPECIALS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _value(text, names, base):
    if names and text.lower() in names:
        return names.index(text.lower()) + base
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def expand(field, lo, hi, names):
    """The set of values a cron time field stands for (Vixie cron's syntax)."""
    base = 1 if names is MONTHS else 0
    out = set()
    for part in field.split(","):
        rng, _, step = part.partition("/")
        step = int(step) if step else 1
        if step < 1:
            raise ValueError(part)
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (_value(x, names, base) for x in rng.split("-", 1))
        else:
            a = _value(rng, names, base)
            b = hi if step > 1 and "/" in part else a
        if not (lo <= a <= hi and lo <= b <= hi and a <= b):
            raise ValueError(part)
        out.update(range(a, b + 1, step))
    if names is DAYS and 7 in out:  # 7 is Sunday too
        out = (out - {7}) | {0}
    return out


def parse_crontab(text):
    """(environment, [(schedule sets, command)]); raises ValueError on a line cron refuses."""
    env, jobs = {}, []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head = line.split(None, 1)[0]
        if "=" in head.split()[0] and not head[0].isdigit() and head[0] not in "*@":
            name, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[name.strip()] = value
            continue
        if line.startswith("@"):
            special, _, command = line.partition(" ")
            if special not in SPECIALS:
                raise ValueError(line)
            fields, command = SPECIALS[special].split(), command.strip()
        else:
            parts = line.split(None, 5)
            if len(parts) < 6:
                raise ValueError(line)
            fields, command = parts[:5], parts[5]
        sets = tuple(expand(f, lo, hi, names) for f, (lo, hi, names) in zip(fields, FIELDS))
        jobs.append((sets, command))
    return env, jobs


def cron_split(command):
    """cron's reading of the command field: up to the first unescaped % is the command (with \\%
    turned into %), the rest is its standard input, each further % a newline."""
    out, i = [], 0
    while i < len(command):
        c = command[i]
        if c == "\\" and i + 1 < len(command) and command[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if c == "%":
            return "".join(out), command[i + 1 :].replace("%", "\n")
        out.append(c)
        i += 1
    return "".join(out), ""


def run_as_cron(env, command, home):
    shell_cmd, stdin = cron_split(command)
    environ = {
        "HOME": str(home),
        "LOGNAME": os.environ.get("LOGNAME", "app"),
        "SHELL": "/bin/sh",
        "PATH": "/usr/bin:/bin",
    }
    environ.update(env)
    shell = environ["SHELL"]
    return subprocess.run(
        [shell, "-c", shell_cmd],
        input=stdin.encode(),
        cwd=home,
        env=environ,
        capture_output=True,
        timeout=20,
    )


def rows(con):
    sql = "SELECT id, customer, total_cents, placed FROM orders ORDER BY id"
    return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def crontab():
    return parse_crontab(CRONTAB.read_text())


def job(crontab, script):
    found = [(s, c) for s, c in crontab[1] if c.split()[0] == script]
    assert len(found) == 1, f"expected one crontab line running {script}, found {len(found)}"
    return found[0]


def test_crontab_valid_and_two_jobs(crontab):
    assert len(crontab[1]) == 2


def test_backup_schedule(crontab):
    sets, _ = job(crontab, "/app/bin/backup-orders")
    assert sets == ({30}, {2}, set(range(1, 32)), set(range(1, 13)), set(range(0, 7)))


def test_prune_schedule(crontab):
    sets, _ = job(crontab, "/app/bin/prune-backups")
    assert sets == ({15}, {3}, set(range(1, 32)), set(range(1, 13)), {0})


def test_scripts_are_executable():
    for script in ("/app/bin/backup-orders", "/app/bin/prune-backups"):
        assert os.access(script, os.X_OK), script
        assert Path(script).read_bytes().startswith(b"#!"), script


def test_database_untouched():
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    pristine = sqlite3.connect(f"file:{PRISTINE / 'orders.db'}?mode=ro&immutable=1", uri=True)
    assert rows(con) == rows(pristine)


def test_jobs_run_as_cron_would(crontab):
    # fresh state: the pristine backups, the live database plus a row only this run knows
    for p in BACKUPS.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    for p in (PRISTINE / "backups").iterdir():
        shutil.copyfile(p, BACKUPS / p.name)
    shutil.copyfile(PRISTINE / "orders.db", DB)
    marker = "verifier-" + uuid.uuid4().hex[:12]
    con = sqlite3.connect(DB)
    con.execute("INSERT INTO orders VALUES (9001, ?, 4242, '2030-01-01')", (marker,))
    con.commit()
    expected = rows(con)
    con.close()
    home = Path(tempfile.mkdtemp(prefix="cronhome-"))
    env = crontab[0]

    before = datetime.date.today()
    _, command = job(crontab, "/app/bin/backup-orders")
    result = run_as_cron(env, command, home)
    after = datetime.date.today()
    names = {f"orders-{d.isoformat()}.db.gz" for d in (before, after)}
    made = [BACKUPS / n for n in names if (BACKUPS / n).is_file()]
    assert made, f"no {sorted(names)} after the backup job ({result.stderr[-500:]!r})"
    raw = gzip.decompress(made[0].read_bytes())
    copy = home / "restored.db"
    copy.write_bytes(raw)
    restored = sqlite3.connect(copy)
    assert restored.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert rows(restored) == expected, "the backup is not a copy of the live database"

    _, command = job(crontab, "/app/bin/prune-backups")
    result = run_as_cron(env, command, home)
    left = {p.name for p in BACKUPS.iterdir()}
    nightly = sorted(
        (p.name for p in (PRISTINE / "backups").iterdir() if p.name.startswith("orders-2024-")),
        reverse=True,
    )
    newest = sorted(nightly + [made[0].name], reverse=True)[:7]
    for name in newest:
        assert name in left, f"{name} (one of the 7 newest) was deleted"
    for name in sorted(nightly + [made[0].name], reverse=True)[7:]:
        assert name not in left, f"{name} was kept ({result.stderr[-300:]!r})"
    assert "orders-2023-12-31-yearend.db.gz" in left
    assert "README.txt" in left
    for name in ("orders-2023-12-31-yearend.db.gz", "README.txt"):
        assert (BACKUPS / name).read_bytes() == (PRISTINE / "backups" / name).read_bytes()
