"""The agent on a terminal task's machine, on shipped tasks: the session starts with the task's
state at its paths and its service running; bash runs in the working directory and the file
editor takes paths relative to it or absolute; the reference solution, played as a scripted
demonstration, earns the verifier's reward; the final grading keeps what the verifier printed
and, for a spreadsheet task, the changed cells before and after; the verifier's files are
never on the agent's machine."""

import functools
from pathlib import Path

import pytest

from sandboxes import result as R
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import parse
from sandboxes.sessions import SessionError
from tasks_library.task_spec import TaskSpec
from tasks_library.terminal.layout import read_task
from tasks_library.terminal.state import terminal_spec
from tests.sandboxes.conftest import started_session_pool
from training.agents.demonstrations import scripted_terminal_demonstration
from training.agents.environment import TerminalEnvironment
from training.agents.parsers import ParsedMessage, ToolCall

SETS = Path(__file__).resolve().parents[3] / "tasks_library" / "data" / "terminal"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with started_session_pool(tmp_path_factory.mktemp("stores"), "python3.13") as started:
        yield started


@functools.cache
def task(path: str) -> TaskSpec:
    directory = read_task(SETS / path)
    spec = terminal_spec(directory)
    built = materialise(
        parse("python3.13", list(spec.python_packages), debian_packages=list(spec.debian_packages))
    )
    return TaskSpec(
        task_version_id=1,
        prompt=directory.instruction,
        entry_point="",
        visible_tests="",
        hidden_tests="",
        timeout_s=spec.verifier_timeout_s,
        harness="terminal",
        reference_solution=spec.solution["solve.sh"].decode(),
        environment=built.request_field(),
        kind="terminal",
        terminal=spec,
    )


def call(env, name, **arguments):
    step = env.step(
        ParsedMessage(content="", tool_calls=[ToolCall(id="1", name=name, arguments=arguments)])
    )
    return step.observations[0]["content"]


def test_the_machine_starts_with_the_state_the_service_and_no_tests(pool):
    env = TerminalEnvironment(task("sysops/nginx-static-site"))
    [session] = env.open_sessions(1)
    try:
        opening = env.open(session)
        assert [t["function"]["name"] for t in opening.tools] == ["bash", "file_editor", "submit"]
        assert "Your working directory is /app" in opening.system
        assert call(env, "bash", command="pwd").startswith("/app\n")
        notes = call(env, "file_editor", command="view", path="NOTES.md")  # relative: /app
        assert "error" not in notes.split("\n", 1)[0], notes
        assert call(env, "file_editor", command="view", path="/app/NOTES.md") == notes
        # the service the task declares was started with the session (it fails on the broken
        # configuration, which is the task): its process or its error is there to inspect
        started = call(env, "bash", command="cat /tmp/crucible-service-0.log; pgrep -a nginx")
        assert "nginx" in started, started
        verifier = [Path(p).name for p in env.spec.tests if p.endswith((".sh", ".py"))]
        names = " -o ".join(f"-name {name}" for name in verifier)
        hidden = call(
            env,
            "bash",
            command="ls /tests /logs 2>&1; find / \\( -path /proc -o -path /env -o -path /usr \\) "
            f"-prune -o \\( {names} \\) -print 2>/dev/null",
        )
        assert "cannot access '/tests'" in hidden and "cannot access '/logs'" in hidden, hidden
        assert verifier and not any(name in hidden for name in verifier), hidden
        env.close()
    finally:
        session.close()


@pytest.mark.parametrize(
    "path",
    ["sysops/nginx-static-site", "office/xlsx-invoice-formulas", "data_analysis/trips-parquet"],
)
def test_the_reference_played_by_the_agent_earns_the_reward(pool, path):
    spec = task(path)
    demonstration = scripted_terminal_demonstration(TerminalEnvironment(spec))
    assert [m["role"] for m in demonstration.messages][:3] == ["system", "user", "assistant"]
    env = TerminalEnvironment(spec)
    [session] = env.open_sessions(1)
    try:
        env.open(session)
        script = spec.reference_solution.split("\n", 1)[1]  # after its #! line
        output = call(env, "bash", command=script, timeout=30)
        assert output.rstrip().endswith("[exit code 0]"), output
        files = env.final_files()
        graded = env.grade(files)
        # the agent's session was closed before the grading's opened: one session at a time
        with pytest.raises(SessionError):
            session.exec("true")
    finally:
        session.close()
    assert graded.status == R.OK and graded.tests[0].score == 1.0, graded
    if path.startswith("office/xlsx"):  # the replay's table diff of the spreadsheet
        assert "(final)" in graded.tests[0].output and "\n+" in graded.tests[0].output, graded


def test_an_untouched_machine_earns_nothing(pool):
    env = TerminalEnvironment(task("office/xlsx-invoice-formulas"))
    [session] = env.open_sessions(1)
    try:
        env.open(session)
        graded = env.grade(env.final_files())
    finally:
        session.close()
    assert graded.status == R.FAILED and graded.tests[0].score == 0.0
    assert graded.tests[0].output, "what the verifier printed is kept for the replay"
