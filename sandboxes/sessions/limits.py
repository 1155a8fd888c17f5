"""What one session may use, for its whole life, and what one call of it may use."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

MIB = 1024**2
# Room for pid 1 and a call's process beyond what the session's tmpfs may hold: its tmpfs
# pages are charged to its cgroup too, so a full workspace must never leave the cgroup
# without memory for the session's own init (which would make the session, not the call, die).
MEMORY_HEADROOM_BYTES = 64 * MIB
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_COMMAND_BYTES = 100 * 1024  # one control message; a longer program goes in a file first
MAX_ENV_BYTES = 64 * 1024


@dataclass(frozen=True)
class SessionLimits:
    """Limits of one session (see README, "Sandbox sessions").

    Attributes:
        memory_bytes: memory of all the session's processes and of its tmpfs pages (changes
            to the workspace, ``/tmp``, ``/dev/shm``): its cgroup's limit (v1 ``memory``,
            and memory+swap where the host has it); without cgroups, the address space of
            each process (``RLIMIT_AS``). At least the three tmpfs sizes plus 64 MiB.
        processes: processes alive at once (the ``pids`` cgroup; without cgroups,
            ``RLIMIT_NPROC`` of the sandbox user where that is not the host's own user).
        workspace_bytes: bytes the session may write into its workspace (the size of its
            copy-on-write layer's tmpfs), and the largest file it may write (``RLIMIT_FSIZE``).
        workspace_inodes: files and directories it may create in the workspace (and in ``/tmp``).
        tmp_bytes: size of its ``/tmp``.
        shm_bytes: size of its ``/dev/shm``.
        idle_timeout_s: seconds without a call after which its worker closes it.
        max_lifetime_s: seconds after opening after which its worker closes it.
        keep_processes: processes a call leaves running live on until the session closes
            (within ``processes``); False (the default): they are killed when the call ends.
    """

    memory_bytes: int = 1024 * MIB
    processes: int = 256
    workspace_bytes: int = 256 * MIB
    workspace_inodes: int = 65536
    tmp_bytes: int = 128 * MIB
    shm_bytes: int = 64 * MIB
    idle_timeout_s: float = 600.0
    max_lifetime_s: float = 4 * 3600.0
    keep_processes: bool = False

    def __post_init__(self) -> None:
        for name in (
            "memory_bytes",
            "processes",
            "workspace_bytes",
            "workspace_inodes",
            "tmp_bytes",
            "shm_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"SessionLimits.{name} must be a positive integer, not {value!r}")
        for name in ("idle_timeout_s", "max_lifetime_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SessionLimits.{name} must be a positive number, not {value!r}")
        if not isinstance(self.keep_processes, bool):
            raise ValueError(
                f"SessionLimits.keep_processes must be True or False, not {self.keep_processes!r}"
            )
        floor = self.workspace_bytes + self.tmp_bytes + self.shm_bytes + MEMORY_HEADROOM_BYTES
        if self.memory_bytes < floor:
            raise ValueError(
                f"SessionLimits.memory_bytes ({self.memory_bytes}) must be at least "
                f"workspace_bytes + tmp_bytes + shm_bytes + 64 MiB ({floor}): the session's "
                "files live in its memory"
            )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> SessionLimits:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: an unknown key (named) or a bad value.
        """
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown session limit(s): {', '.join(unknown)}")
        return cls(**data)


def check_exec(
    command: str,
    *,
    timeout_s: float,
    cpu_s: int | None,
    env: dict | None,
    output_cap_bytes: int,
) -> None:
    """Refuse a call's arguments that cannot run, naming the argument.

    Raises:
        ValueError: a command that is not a non-empty string or is longer than 100 KiB
            (write it to a file first), a non-positive timeout, CPU limit or output cap, an
            environment variable with a bad name or value.
    """
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string (run with bash -c)")
    if "\0" in command or len(command.encode("utf-8", "surrogateescape")) > MAX_COMMAND_BYTES:
        raise ValueError(
            f"command has a NUL byte or is over {MAX_COMMAND_BYTES} bytes; write a script file "
            "with Session.write and run that"
        )
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    if cpu_s is not None and (isinstance(cpu_s, bool) or not isinstance(cpu_s, int) or cpu_s <= 0):
        raise ValueError(f"cpu_s must be a positive integer of seconds, not {cpu_s!r}")
    if (
        isinstance(output_cap_bytes, bool)
        or not isinstance(output_cap_bytes, int)
        or (output_cap_bytes <= 0)
    ):
        raise ValueError(f"output_cap_bytes must be a positive integer, not {output_cap_bytes!r}")
    size = 0
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise ValueError(f"environment variable name {name!r} is not a shell name")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"environment variable {name} must be a string without NUL")
        size += len(name) + len(value)
    if size > MAX_ENV_BYTES:
        raise ValueError(f"the environment is over {MAX_ENV_BYTES} bytes")
