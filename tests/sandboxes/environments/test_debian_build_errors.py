"""A Debian root build that fails says why: mmdebstrap's own exit and output, not the empty
archive its failure leaves on the pipe (CI once read only "archive could not be read: empty
file" from a build that had failed at once)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from sandboxes.environments.debian import build_root
from sandboxes.environments.store import EnvironmentBuildError


@pytest.fixture
def bin_dir():
    """A directory the build's namespace root (an unprivileged host id) may enter: pytest's own
    temporary directories are the host root's alone."""
    directory = Path(tempfile.mkdtemp(prefix="crucible-fake-mmdebstrap-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def fake_mmdebstrap(directory, body: str):
    script = directory / "mmdebstrap"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return directory


def test_a_build_that_fails_at_once_reports_mmdebstrap_s_error(tmp_path, bin_dir, monkeypatch):
    fake_mmdebstrap(bin_dir, "echo 'E: Unable to locate package nosuchpkg' >&2\nexit 100\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(EnvironmentBuildError) as failed:
        build_root("python3.13", tmp_path / "tree", debian_packages=["nosuchpkg"])
    assert failed.value.kind == "not_found"
    assert "'nosuchpkg'" in str(failed.value) and "Unable to locate" in failed.value.log


def test_output_that_is_no_archive_is_refused_by_name(tmp_path, bin_dir, monkeypatch):
    fake_mmdebstrap(bin_dir, "echo 'not a tar archive'\nexit 0\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(EnvironmentBuildError, match="archive could not be read"):
        build_root("python3.13", tmp_path / "tree")
