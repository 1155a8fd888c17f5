"""Sandbox sessions as they run in a pod: a numeric non-root user with no capabilities and
no_new_privs (see test_sandbox_as_pod_user.py). No cgroups there: limits are rlimits
(``enforcement == "rlimit"``); the session's overlay is mounted inside the sandbox's user
namespace, its workspace belongs to the sandbox user (uid 0 inside, the pod's user outside),
and nothing of the worker's files, network or user is in reach."""

from tests.deploy.manifests import ROOT
from tests.deploy.test_sandbox_as_pod_user import pytestmark, run_as_pod_user  # noqa: F401

PROBE = """
import json, os, sys
sys.path.insert(0, %(root)r)
from pathlib import Path
from sandboxes.sessions.host import SessionHost
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.store import WorkspaceStore
from sandboxes.sessions.workspace import Workspace

store = WorkspaceStore(Path(os.environ["HOME"]) / "store")
host = SessionHost(store)
host.start()
workspace = Workspace.from_files({"task.txt": "start\\n"})
session = host.open(workspace.digest, SessionLimits(), load_blob=lambda: workspace.blob)
look = host.exec(session.id, "id -u; ls %(root)s 2>&1 | head -1; echo changed > task.txt; "
                 "setsid sleep 1000 > /dev/null 2>&1 & echo done")
after = host.exec(session.id, "cat task.txt; pgrep sleep || echo none")
diff = host.file_op(session.id, "diff", {})["diff"]
pid = session.pid
host.close(session.id)
host.stop()
gone = not os.path.exists(f"/proc/{pid}/ns")
store.close()
print(json.dumps({"me": os.getuid(), "look": look.stdout, "after": after.stdout,
                  "statuses": [look.status, after.status], "enforcement": look.enforcement,
                  "diff": diff, "gone": gone, "stderr": look.stderr + after.stderr}))
"""


def test_a_session_as_the_pod_user_holds_its_isolation():
    seen = run_as_pod_user(PROBE % {"root": str(ROOT)})
    assert seen["me"] == 10001
    assert seen["statuses"] == ["ok", "ok"], seen
    uid, project, done = seen["look"].splitlines()
    assert uid == "0"  # root only inside its own user namespace
    assert "No such file or directory" in project  # the worker's files are not there
    assert done == "done"
    assert seen["after"] == "changed\nnone\n"  # the workspace persists; the daemon does not
    assert "-start\n+changed\n" in seen["diff"]
    assert seen["enforcement"] == "rlimit"
    assert seen["gone"]
