"""A build step of an environment (pip, npm) run on the host, and what its failure
means: the error names the package pip or npm could not find or reconcile, a full disk, a time
limit. Imported by the package builders and the Debian root builder alike.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from sandboxes.environments.store import EnvironmentBuildError

LOG_TAIL_CHARS = 20000

MISSING = (
    re.compile(r"No matching distribution found for ([^\s]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s]+)"),
)
CONFLICT = re.compile(r"Cannot install (.+?) because these package versions have conflicting")
CONFLICT_CAUSE = re.compile(r"The conflict is caused by:\n((?:\s+.+\n)+)")


def tail(text: str) -> str:
    return text[-LOG_TAIL_CHARS:]


def run_step(command: list[str], *, timeout_s: float, what: str, cwd: Path | None = None) -> str:
    """Run a build step; its combined output, or :class:`EnvironmentBuildError`."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        raise EnvironmentBuildError(
            f"{what} took more than {timeout_s:.0f} s and was stopped; raise the build's time "
            "limit or install fewer packages",
            kind="timeout",
            log=tail(out),
        ) from None
    except FileNotFoundError as exc:
        raise EnvironmentBuildError(
            f"{what}: {exc.filename} is not installed on this machine", kind="runtime_unavailable"
        ) from None
    log = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}"
    if done.returncode != 0:
        raise classify_failure(what, done.stdout + done.stderr, log)
    return log


def classify_failure(what: str, output: str, log: str) -> EnvironmentBuildError:
    """The error a failed pip or npm run means, with the package it names."""
    if "No space left on device" in output or "ENOSPC" in output:
        return EnvironmentBuildError(
            f"{what} ran out of disk space; free space under the environment store",
            kind="out_of_disk",
            log=tail(log),
        )
    for pattern in MISSING:
        found = pattern.search(output)
        if found:
            package = found.group(1).rstrip(")")
            wheels_only = "--only-binary=:all:" in log
            return EnvironmentBuildError(
                f"{what}: package {package} has no release (or no wheel for this runtime) on the "
                "package index; check the name and version on pypi.org and fix the pin"
                + (
                    ". Crucible installs wheels only, since building an sdist runs the "
                    "project's own code; to build this one, allow source builds on the "
                    "environment (source_builds: true), which builds in a sandbox"
                    if wheels_only
                    else ""
                ),
                kind="missing_package",
                package=package,
                log=tail(log),
            )
    if "ResolutionImpossible" in output or "conflicting dependencies" in output:
        found = CONFLICT.search(output)
        causes = CONFLICT_CAUSE.search(output)
        package = found.group(1) if found else ""
        detail = " ".join(causes.group(1).split()) if causes else ""
        return EnvironmentBuildError(
            f"{what}: the pins conflict ({detail or package}); pick versions whose "
            "dependencies agree",
            kind="conflict",
            package=package,
            log=tail(log),
        )
    if "DO NOT MATCH THE HASHES" in output or "Hashes are required" in output:
        return EnvironmentBuildError(
            f"{what}: a downloaded file does not match its --hash (or a dependency has no "
            "hash); correct the hashes, or pin and hash every dependency",
            kind="bad_hash",
            log=tail(log),
        )
    if "E404" in output or "404 Not Found" in output:
        found = re.search(r"The requested resource '([^']+)' could not be found", output)
        found = found or re.search(r"404 Not Found - GET \S+/(\S+?)(?: - |\s|$)", output)
        package = found.group(1) if found else ""
        return EnvironmentBuildError(
            f"{what}: package {package or '(see the log)'} does not exist on the npm registry; "
            "check the name and version",
            kind="missing_package",
            package=package,
            log=tail(log),
        )
    if "ETARGET" in output:
        found = re.search(r"No matching version found for (\S+)", output)
        package = found.group(1).rstrip(".") if found else ""
        return EnvironmentBuildError(
            f"{what}: {package or 'a package'} has no such version on the npm registry",
            kind="missing_package",
            package=package,
            log=tail(log),
        )
    last = [line for line in output.strip().splitlines() if line.strip()][-3:]
    return EnvironmentBuildError(
        f"{what} failed: {' / '.join(last) or 'no output'}", kind="failed", log=tail(log)
    )
