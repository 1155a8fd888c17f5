"""The two trees of one grading, started before their job arrives.

Every grading runs the submission in one tree and the tests in another, joined by a
request pipe and a reply pipe (see ``grading.py`` and ``javascript.py``). A
:class:`WarmGrader` keeps one such pair booted ahead: each tree has entered its
namespaces, dropped its privileges and (for Node.js) started its interpreter, and
now blocks reading its job on fd 3. Handing over a job is one pipe write, so no
process creation sits on a request's path; the next pair boots while the host
returns the current result, or (``boot_ahead`` off: the queue's worker) once the
caller has sent the answer on and calls :meth:`WarmGrader.prewarm`.

Descriptors every tree gets: 0-2 (stdin from ``/dev/null``, stdout, stderr), 3 the
job, 4 the request pipe, 5 the reply pipe, and for the tests' tree 6 the results. A
grader whose :attr:`WarmGrader.runner_fds` name ``audit`` also gives the submission's tree
6, the audit pipe (events its harness records, see ``harness/python_runner.py``).
"""

from __future__ import annotations

import json
import os
import resource
import threading
from dataclasses import dataclass

from sandboxes.process import Limits, ProcessOutcome
from sandboxes.resident import Tree, Zygote, ZygoteDied, watch

PIPE_BUF_BYTES = 65536  # Linux's default pipe capacity
RUNNER_FDS = ["job", "request", "reply"]
AUDITED_RUNNER_FDS = [*RUNNER_FDS, "audit"]
DRIVER_FDS = ["job", "request", "reply", "results"]


@dataclass
class WarmTree:
    """A started tree waiting for its job on ``job_fd``; ``pipes`` are the host's read ends.
    ``pid`` is 0 until the zygote's answer is read (:meth:`resolve`)."""

    zygote: Zygote
    job_fd: int
    pipes: dict[str, int]
    pid: int = 0

    def resolve(self) -> int:
        if not self.pid:
            self.pid = self.zygote.tree_pid()
        return self.pid

    def close(self) -> None:
        """Drop the tree (it reads EOF for a job and exits); its zygote's answer is consumed."""
        if not self.pid and self.zygote.alive:
            try:
                self.resolve()
            except ZygoteDied:
                pass
        for fd in (self.job_fd, *self.pipes.values()):
            os.close(fd)


def job_limits(limits: Limits, *, cgroup: bool) -> dict:
    """The limits a tree lowers its own to when its job arrives (rlimits only go down)."""
    return {
        "cpu_s": limits.cpu_s,
        "file_size_bytes": limits.file_size_bytes,
        "processes": limits.processes,
        "address_space_bytes": limits.memory_bytes * 4 if cgroup else limits.memory_bytes,
    }


class WarmGrader:
    """Two zygotes (the submissions' and the tests') and the next pair of trees.

    The two zygotes never share memory: the tests' zygote never runs a submission and
    the submissions' zygote never receives a test, so no execution can find another's
    expected values in what it inherited. Not thread-safe: one grader per worker thread.

    Subclasses set :attr:`runner` and :attr:`driver` and may give interpreters to
    ``execve`` (:meth:`exec_argv`).
    """

    runner: Zygote
    driver: Zygote
    spare: tuple[WarmTree, WarmTree] | None = None
    # Boot the next pair at the end of run_pair (while the caller reads the result). A
    # caller with a better moment sets False and calls prewarm() itself: the queue's
    # worker does, once the answer is on its way, so the boot is off every request's path.
    boot_ahead: bool = True
    runner_fds: list[str] = (
        RUNNER_FDS  # AUDITED_RUNNER_FDS: the submission's tree reports audit events
    )

    def exec_argv(self, role: str) -> list[str] | None:
        """The interpreter a tree of ``role`` (``runner``/``driver``) execs; None runs the
        zygote's Python."""
        return None

    def ensure_started(self) -> None:
        """(Re)start whichever zygote is not running.

        Raises:
            ZygoteDied: a zygote could not start.
        """
        for zygote in (self.runner, self.driver):
            if not zygote.alive:
                self._drop_spare()
                zygote.stop()
                zygote.start()

    def prewarm(self) -> None:
        """Boot the next pair now, unless one is booted already.

        Raises:
            ZygoteDied: a zygote could not start.
        """
        self.ensure_started()
        if self.spare is None:
            self.spare = self._boot_pair()

    def close(self) -> None:
        self._drop_spare()
        self.runner.stop()
        self.driver.stop()

    def _drop_spare(self) -> None:
        if self.spare is not None:
            for tree in self.spare:
                tree.close()
            self.spare = None

    def _boot_pair(self) -> tuple[WarmTree, WarmTree]:
        names = (
            "request",
            "reply",
            "r_out",
            "r_err",
            "r_exit",
            "r_job",
            "d_out",
            "d_err",
            "d_exit",
            "d_job",
            "results",
        )
        audited = "audit" in self.runner_fds
        if audited:
            names += ("r_audit",)
        p = {name: os.pipe() for name in names}
        sent: set[int] = set()
        try:
            runner_fds = {
                "stdout": p["r_out"][1],
                "stderr": p["r_err"][1],
                "exit": p["r_exit"][1],
                "job": p["r_job"][0],
                "request": p["request"][0],
                "reply": p["reply"][1],
            }
            if audited:
                runner_fds["audit"] = p["r_audit"][1]
            sent |= set(runner_fds.values())  # start_tree closes them, whatever happens
            self.runner.start_tree(
                role_fds=self.runner_fds,
                limits=Limits(),
                fds=runner_fds,
                exec_argv=self.exec_argv("runner"),
                own_network=True,
            )
            driver_fds = {
                "stdout": p["d_out"][1],
                "stderr": p["d_err"][1],
                "exit": p["d_exit"][1],
                "job": p["d_job"][0],
                "request": p["request"][1],
                "reply": p["reply"][0],
                "results": p["results"][1],
            }
            sent |= set(driver_fds.values())
            self.driver.start_tree(
                role_fds=DRIVER_FDS,
                limits=Limits(),
                fds=driver_fds,
                exec_argv=self.exec_argv("driver"),
            )
        except BaseException:
            for fd in (fd for pair in p.values() for fd in pair):
                if fd not in sent:  # start_tree closed what it was given; the rest is ours
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            raise
        runner_pipes = {"stdout": p["r_out"][0], "stderr": p["r_err"][0], "exit": p["r_exit"][0]}
        if audited:
            runner_pipes["audit"] = p["r_audit"][0]
        return (
            WarmTree(self.runner, p["r_job"][1], runner_pipes),
            WarmTree(
                self.driver,
                p["d_job"][1],
                {
                    "stdout": p["d_out"][0],
                    "stderr": p["d_err"][0],
                    "exit": p["d_exit"][0],
                    "results": p["results"][0],
                },
            ),
        )

    def run_pair(
        self, runner_job: dict, driver_job: dict, limits: Limits
    ) -> tuple[ProcessOutcome, ProcessOutcome]:
        """Hand the jobs to the booted pair (booting one now if none is), wait for both trees.

        Each job gets ``"limits"`` added (see :func:`job_limits`).

        Raises:
            ZygoteDied: a zygote died before or during the execution.
        """
        self.ensure_started()
        runner, driver = self.spare or self._boot_pair()
        self.spare = None
        try:
            for tree in (runner, driver):
                tree.resolve()
        except ZygoteDied:
            runner.close()
            driver.close()
            raise
        for zygote in (self.runner, self.driver):
            zygote.prepare_cgroup(limits)
        for role, tree in (("runner", runner), ("driver", driver)):
            if self.exec_argv(role):  # an exec'd interpreter cannot lower its own CPU limit: we do
                _lower_cpu_limit(tree.pid, limits.cpu_s, tree.zygote)
        writers = []
        for tree, job in ((runner, runner_job), (driver, driver_job)):
            data = json.dumps(
                dict(job, limits=job_limits(limits, cgroup=bool(tree.zygote.cgroup)))
            ).encode()
            if len(data) <= PIPE_BUF_BYTES:  # fits the pipe: written at once, no reader needed yet
                _write_job(tree.job_fd, data)
            else:  # a thread waits for the tree to read the rest
                writers.append(
                    threading.Thread(target=_write_job, args=(tree.job_fd, data), daemon=True)
                )
                writers[-1].start()
        outcomes = watch(
            [
                Tree(self.runner, runner.pid, runner.pipes, limits),
                Tree(self.driver, driver.pid, driver.pipes, limits, kill_on_output=False),
            ],
            deadline_s=limits.wall_timeout_s,
        )
        for writer in writers:
            writer.join(timeout=5)
        for zygote in (self.runner, self.driver):
            if not zygote.alive:  # its trees died with it: the platform failed, not the submission
                raise ZygoteDied(f"sandbox process for {zygote.role} died during the execution")
            if zygote.cgroup:  # between trees: the zygote's own usage, the next peak's baseline
                zygote.cgroup.note_idle_usage()
        if self.boot_ahead:
            self.spare = (
                self._boot_pair()
            )  # asked for now, forked while the caller reads the result
        return outcomes[0], outcomes[1]


def _lower_cpu_limit(pid: int, cpu_s: int, zygote: Zygote) -> None:
    """Lower a booted tree's CPU rlimit from outside (its init sets its own limits
    never above what it finds, so the order of the two does not matter)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:  # still our tree, not a reused pid
            if int(handle.read().rsplit(")", 1)[1].split()[1]) != zygote.process.pid:
                return
        soft, hard = resource.prlimit(pid, resource.RLIMIT_CPU)
        if hard == resource.RLIM_INFINITY or cpu_s + 1 <= hard:
            resource.prlimit(pid, resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    except (OSError, ValueError, AttributeError):
        pass  # the tree is gone already; its outcome says how


def _write_job(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the tree died before reading its job; its outcome says how
    finally:
        os.close(fd)
