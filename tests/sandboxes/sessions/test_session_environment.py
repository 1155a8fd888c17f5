"""A session of an environment with packages: its shell's Python imports them (read-only at
/env, on PYTHONPATH); a session without the environment cannot; writing into it fails."""

from __future__ import annotations

from sandboxes import result as R
from sandboxes.sessions import Workspace, open_session
from tests.environments import built

WORKSPACE = Workspace.from_files({"analysis.py": "import pandas\nprint(pandas.__version__)\n"})


def test_a_session_runs_in_its_environment_and_only_there(session_pool):
    environment = built("python3.11-numpy-pandas").request_field()
    with open_session(WORKSPACE, runtime=session_pool.runtime, environment=environment) as inside:
        result = inside.exec("python3 analysis.py")
        assert result.status == R.OK, result.stderr
        assert result.stdout.strip() == "3.1.1"
        planted = inside.exec(
            "touch /env/site-packages/pwned 2>&1; echo x > /env/site-packages/pandas/__init__.py"
        )
        assert planted.exit_code != 0 and "Read-only file system" in planted.stderr + planted.stdout
    with open_session(WORKSPACE, runtime=session_pool.runtime) as bare:
        result = bare.exec("python3 analysis.py")
        assert result.status != R.OK and "No module named 'pandas'" in result.stderr
