"""A build in a user namespace (sandboxes/environments/userns.py) gets a TMPDIR and HOME of its
own, whatever the caller's: a caller's private TMPDIR (``tempfile.mkdtemp``: mode 0700, the
host root's) is closed to the namespace's root, an unprivileged host id, and mmdebstrap then
failed its cold builds with ``tempdir() ... Permission denied``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from sandboxes.environments.userns import run_as_namespace_root

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="user-namespace builds start as root")


def test_a_build_writes_its_temp_files_and_home_whatever_the_callers_tmpdir():
    with tempfile.TemporaryDirectory() as private:
        os.chmod(private, 0o700)  # what mkdtemp makes: only the host's root may enter
        env = {**os.environ, "TMPDIR": private, "HOME": "/root"}
        done = run_as_namespace_root(
            ["sh", "-c", 'd=$(mktemp -d) && touch "$d/x" "$HOME/.cfg" && echo "$TMPDIR $d"'],
            timeout_s=60,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        tmpdir, made = done.stdout.split()
        assert made.startswith(tmpdir + "/") and tmpdir != private
        # the scratch belonged to the namespace's root and is gone after the build
        assert not Path(tmpdir).exists()
        assert not any(Path(private).iterdir())
