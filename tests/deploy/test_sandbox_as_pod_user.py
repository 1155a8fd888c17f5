"""The sandbox as it runs in a pod: a numeric non-root user with no capabilities (not even in
its bounding set) and no_new_privs, as the restricted profile and deploy/kubernetes set it.
Without root there are no cgroups to create, so memory and processes are held by rlimits
(``enforcement == "rlimit"``), and the zygote's namespaces still keep an execution from the
worker's files, its network and its user. Needs root to become that user (setpriv); skips
elsewhere. What does not hold in a default container (RuntimeDefault seccomp, masked /proc) is
written down in deploy/README.md, "Isolation in pods"; there the sandbox says infra_error, never
a score, and its worker refuses to start (tests/sandboxes/test_sandbox_worker_self_check.py)."""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

from tests.deploy.manifests import ROOT

UID = 10001
SYSTEM_PYTHON = (
    "/usr/bin/python3.11"  # readable by any user, as /usr/local/bin/python3.11 is in the image
)
SITE_PACKAGES = next((ROOT / ".venv" / "lib").glob("python3.*/site-packages"), None)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or not shutil.which("setpriv")
    or not os.path.exists(SYSTEM_PYTHON)
    or SITE_PACKAGES is None,
    reason=(
        "needs root (to become the pod's uid with setpriv), util-linux setpriv and "
        "/usr/bin/python3.11"
    ),
)

PROBE = (
    """
import json, os, sys
sys.path.insert(0, %(root)r)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
import django
django.setup()
from sandboxes.grading import run_python_tests
from sandboxes.process import Limits

SUBMISSION = '''
import os, socket
def look(path, port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        reached = True
    except OSError:
        reached = False
    return {"project": os.path.exists(path), "uid": os.getuid(), "reached": reached,
            "environ": sorted(k for k in os.environ if "REDIS" in k or "DATABASE" in k)}
'''
CHECK = '''
def check(candidate):
    assert candidate(%(manage)r, %(port)d) == {"project": False, "uid": 0, "reached": False,"""
    """ "environ": []}
'''
result = run_python_tests(SUBMISSION, CHECK, "look", limits=Limits())"""
    """  # a failed sandbox: infra_error
print(json.dumps({"me": os.getuid(),"""
    """ "caps": open("/proc/self/status").read().split("CapBnd:")[1].split()[0],
                  "status": result.status, "passed": [t.passed for t in result.tests],
                  "enforcement": result.enforcement, "readonly_root": result.readonly_root,
                  "stderr": result.stderr[-2000:],"""
    """ "detail": result.detail[-2000:]}))
"""
)


def _grade_as_pod_user(*, mask_proc: bool) -> dict:
    """Run PROBE as the pod's user; with ``mask_proc``, under /proc masked as runc masks it
    (files bound over with /dev/null, /proc/sys read-only) in a mount namespace of its own."""
    port = 6379
    if settings.REDIS_URL.startswith("redis://"):
        port = int(settings.REDIS_URL.split(":")[2].split("/")[0])
    source = PROBE % {"root": str(ROOT), "manage": str(ROOT / "manage.py"), "port": port}
    return run_as_pod_user(source, port=port, mask_proc=mask_proc)


def run_as_pod_user(source: str, *, port: int = 6379, mask_proc: bool = False) -> dict:
    """Run the Python ``source`` as the pod's user (see :func:`_grade_as_pod_user`); returns
    the JSON object its last line of output holds."""
    home = Path(tempfile.mkdtemp(prefix="crucible-pod-user-"))
    try:
        os.chown(home, UID, UID)
        probe = home / "probe.py"
        probe.write_text(source)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "CRUCIBLE_VAR_DIR": str(home / "var"),
            "PYTHONPATH": str(SITE_PACKAGES),
            "REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "DATABASE_URL": "postgres://crucible:secret@127.0.0.1:9/crucible",
        }
        command = [
            "setpriv",
            f"--reuid={UID}",
            f"--regid={UID}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            SYSTEM_PYTHON,
            str(probe),
        ]
        if mask_proc:
            masks = (
                "mount --bind /dev/null /proc/keys && mount --bind /dev/null /proc/timer_list && "
                "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec "
            )
            command = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                masks + " ".join(shlex.quote(word) for word in command),
            ]
        done = subprocess.run(
            command, check=False, env=env, capture_output=True, text=True, timeout=120, cwd=home
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_grading_as_the_pod_user_holds_its_isolation(redis_service):
    report = _grade_as_pod_user(mask_proc=False)
    assert (
        report["me"] == UID and int(report["caps"], 16) == 0
    )  # the pod's user, no capability at all
    # The execution cannot see the project, reach the host's loopback (Redis) or read the
    # worker's secrets; it is uid 0 only inside its own user namespace (mapped to 10001 outside).
    assert report["status"] == "ok" and report["passed"] == [True], report
    assert (
        report["enforcement"] == "rlimit"
    )  # no cgroup without root: rlimits hold memory and processes
    assert report["readonly_root"] == "mount_setattr"


def test_a_sandbox_that_cannot_set_up_says_infra_error(redis_service):
    """In a container with runc's masked /proc and no procMount: Unmasked, every execution's
    procfs mount is refused. That is the infrastructure failing, never the submission."""
    report = _grade_as_pod_user(mask_proc=True)
    assert report["status"] == "infra_error", report
    assert "mount /proc: Operation not permitted" in report["detail"], report  # the step, named
    assert report["passed"] == []  # nothing was graded: no test reads as failed either
