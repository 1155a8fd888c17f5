"""logrotate, run as the account with the final /app/logrotate/ingest.conf on a fresh copy of
the logs, rotates as the policy says."""

import gzip
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CONF = Path("/app/logrotate/ingest.conf")
LOGS = Path("/srv/logs/ingest")
PRISTINE = Path("/tests/pristine/ingest")


def reset():
    for p in LOGS.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    for p in PRISTINE.iterdir():
        shutil.copyfile(p, LOGS / p.name)


def rotate(state):
    r = subprocess.run(
        ["/usr/sbin/logrotate", "-f", "-s", str(state), str(CONF)],
        capture_output=True,
        text=True,
        timeout=20,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0 and "error" not in r.stderr.lower(), r.stderr[-800:]


def plain(name):
    return (LOGS / name).read_bytes()


def unz(name):
    return gzip.decompress((LOGS / name).read_bytes())


def p(name):
    return (PRISTINE / name).read_bytes()


def test_no_scripts_in_config():
    text = re.sub(r"#.*", "", CONF.read_text())
    for word in ("prerotate", "postrotate", "firstaction", "lastaction", "preremove"):
        assert not re.search(rf"\b{word}\b", text), word


def test_rotations():
    reset()
    state = Path(tempfile.mkdtemp(prefix="lr-")) / "state"
    audit = {n: p(n) for n in ("audit.log", "audit.log.1")}
    c0, p1, p2, p3 = (
        p("ingest.log"),
        p("ingest.log.1"),
        gzip.decompress(p("ingest.log.2.gz")),
        gzip.decompress(p("ingest.log.3.gz")),
    )
    inode = (LOGS / "ingest.log").stat().st_ino

    rotate(state)  # run 1
    assert (LOGS / "ingest.log").stat().st_ino == inode, "ingest.log was moved, not truncated"
    assert plain("ingest.log") == b""
    assert plain("ingest.log.1") == c0
    assert unz("ingest.log.2.gz") == p1
    assert unz("ingest.log.3.gz") == p2
    assert unz("ingest.log.4.gz") == p3
    assert not (LOGS / "ingest-errors.log.1").exists(), "an empty log was rotated"

    rotate(state)  # run 2: nothing was written, nothing rotates
    assert plain("ingest.log.1") == c0 and not (LOGS / "ingest.log.5.gz").exists()

    lines = []
    for i in range(1, 4):  # runs 3-5, the daemon writing through its open file
        line = f"2026-03-10T0{i}:00:00Z INFO batch=run{i}\n".encode()
        with open(LOGS / "ingest.log", "ab") as f:
            f.write(line)
        lines.append(line)
        err = f"2026-03-10T0{i}:00:01Z ERROR batch=run{i} failed\n".encode()
        with open(LOGS / "ingest-errors.log", "ab") as f:
            f.write(err)
        rotate(state)
        assert (LOGS / "ingest.log").stat().st_ino == inode
        assert plain("ingest.log") == b"" and plain("ingest-errors.log") == b""

    assert plain("ingest.log.1") == lines[2]
    assert unz("ingest.log.2.gz") == lines[1]
    assert unz("ingest.log.3.gz") == lines[0]
    assert unz("ingest.log.4.gz") == c0
    assert unz("ingest.log.5.gz") == p1
    assert plain("ingest-errors.log.1").endswith(b"run3 failed\n")
    assert unz("ingest-errors.log.2.gz").endswith(b"run2 failed\n")
    assert unz("ingest-errors.log.3.gz").endswith(b"run1 failed\n")
    names = sorted(x.name for x in LOGS.iterdir())
    assert names == sorted(
        [
            "audit.log",
            "audit.log.1",
            "ingest-errors.log",
            "ingest-errors.log.1",
            "ingest-errors.log.2.gz",
            "ingest-errors.log.3.gz",
            "ingest.log",
            "ingest.log.1",
            "ingest.log.2.gz",
            "ingest.log.3.gz",
            "ingest.log.4.gz",
            "ingest.log.5.gz",
        ]
    ), names
    for name, data in audit.items():
        assert plain(name) == data, f"{name} was touched"
