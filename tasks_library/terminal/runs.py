"""Running a terminal task: its session as the agent gets it, its reference solution, its grading.

Each is a composition of :mod:`sandboxes.sessions.terminal` (sessions, services, the verifier)
and :mod:`tasks_library.terminal.state` (what a state is, what a grading keeps of it):

- :func:`open_agent_session`: the starting state, the task's services running, no tests;
- :func:`grade`: a session's changes turned into the final state a grading keeps
  (:func:`~tasks_library.terminal.state.final_state`), verified in a fresh session;
- :func:`run_reference`: ``solution/solve.sh`` run in the agent's place (``/solution``
  read-only beside the state), then graded the same way; what validation does N times.
"""

from __future__ import annotations

from dataclasses import dataclass

from sandboxes import result as R
from sandboxes.sessions import Session, SessionError, SessionLost
from sandboxes.sessions.terminal import (
    VerifierOutcome,
    open_terminal_session,
    run_verifier,
    state_workspace,
)
from tasks_library.terminal.state import TerminalSpec, executable_paths, final_state

SOLUTION_OUTPUT_CHARS = 4000


def _queue(environment: dict | None) -> str:
    return (environment or {}).get("queue") or "python"


def open_agent_session(
    spec: TerminalSpec, environment: dict | None, *, extra_read_only: dict | None = None
) -> Session:
    """A session of ``spec``'s starting state with its services started (``extra_read_only``:
    ``{"/solution": files}`` mounted read-only beside it, for the reference).

    Raises:
        SessionError: the session could not open (``lost``: an infrastructure error).
    """
    workspace = state_workspace(spec.state, spec.executable, extra=extra_read_only)
    session, _services, _isolation = open_terminal_session(
        workspace,
        state_dirs=spec.state_dirs,
        read_only=sorted(extra_read_only or {}),
        services=spec.services,
        workdir=spec.workdir,
        env=spec.env,
        environment=environment,
        runtime=_queue(environment),
    )
    return session


def grade(spec: TerminalSpec, changes, environment: dict | None) -> VerifierOutcome:
    """Verify the final state the session ``changes`` (``WorkspaceChanges``) leave, in a fresh
    session (see :func:`~tasks_library.terminal.state.final_state` for what is kept)."""
    files = final_state(spec, changes)
    return run_verifier(
        files,
        executable=executable_paths(spec, changes, files),
        state_dirs=spec.state_dirs,
        tests=spec.tests,
        workdir=spec.workdir,
        env=spec.env,
        services=spec.services,
        timeout_s=spec.verifier_timeout_s,
        environment=environment,
        runtime=_queue(environment),
    )


class NoChanges:
    """The changes of a session that changed nothing (the untouched state)."""

    files: dict = {}
    executable: frozenset = frozenset()
    symlinks: dict = {}
    deleted: tuple = ()


def grade_untouched(spec: TerminalSpec, environment: dict | None) -> VerifierOutcome:
    """Verify the starting state as the agent receives it."""
    return grade(spec, NoChanges(), environment)


@dataclass
class ReferenceRun:
    """One run of the reference solution: its script's result and the grading after it."""

    solve: R.ExecutionResult | None
    outcome: VerifierOutcome

    def evidence(self) -> dict:
        solve = self.solve
        return {
            "reward": self.outcome.reward,
            "status": self.outcome.status,
            "detail": self.outcome.detail,
            "verifier_output": self.outcome.output[-SOLUTION_OUTPUT_CHARS:],
            "solve_status": solve.status if solve else "",
            "solve_output": (
                (solve.stdout + solve.stderr)[-SOLUTION_OUTPUT_CHARS:] if solve else ""
            ),
            "isolation": self.outcome.isolation,
        }


def run_reference(spec: TerminalSpec, environment: dict | None) -> ReferenceRun:
    """Run ``solution/solve.sh`` in a session of the starting state (its working directory, the
    task's environment variables, the agent's time limit), then grade what it left."""
    if "solve.sh" not in spec.solution:
        return ReferenceRun(
            None, VerifierOutcome(R.FAILED, detail="the task has no solution/solve.sh")
        )
    try:
        session = open_agent_session(
            spec, environment, extra_read_only={"/solution": spec.solution}
        )
    except SessionError as exc:
        status = R.INFRA_ERROR if isinstance(exc, SessionLost) else R.FAILED
        return ReferenceRun(None, VerifierOutcome(status, detail=f"no session: {exc}"))
    try:
        solve = session.exec(
            "bash /solution/solve.sh",
            cwd=spec.workdir,
            env=spec.env,
            timeout_s=spec.agent_timeout_s,
        )
        changes = session.changes()
    except SessionLost as exc:
        return ReferenceRun(None, VerifierOutcome(R.INFRA_ERROR, detail=f"session lost: {exc}"))
    finally:
        session.close()
    if solve.status == R.INFRA_ERROR:
        return ReferenceRun(solve, VerifierOutcome(R.INFRA_ERROR, detail=solve.detail))
    return ReferenceRun(solve, grade(spec, changes, environment))
