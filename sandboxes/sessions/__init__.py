"""Sandbox sessions: a persistent, isolated workspace per trajectory (README, "Sandbox sessions").

The client API (what rollouts import from here): :func:`open_session`,
:func:`open_sessions`, :class:`Session` (``exec``, ``read``, ``write``, ``list``, ``diff``,
``changes``, ``close``; a context manager), :class:`Workspace`, :class:`SessionLimits`,
:func:`files_to_grade`, and the errors. The worker's side: ``host.py`` (one slot's session
zygote and sessions), ``slot.py`` (its inbox and leases), ``store.py`` (materialised
workspaces), ``routing.py`` (the Redis keys), and in the sandbox ``harness/session_init.py``
and ``harness/session_files.py``.
"""

from sandboxes.sessions.client import (
    FileEntry,
    Session,
    SessionClosed,
    SessionError,
    SessionFileNotFound,
    SessionLost,
    open_session,
    open_sessions,
)
from sandboxes.sessions.grading import DEFAULT_RESTORE, WorkspaceChanges, files_to_grade, text_files
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.workspace import Workspace

__all__ = [
    "DEFAULT_RESTORE",
    "FileEntry",
    "Session",
    "SessionClosed",
    "SessionError",
    "SessionFileNotFound",
    "SessionLimits",
    "SessionLost",
    "Workspace",
    "WorkspaceChanges",
    "files_to_grade",
    "open_session",
    "open_sessions",
    "text_files",
]
