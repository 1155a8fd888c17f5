"""Sandbox sessions: a persistent, isolated workspace per trajectory (README, "Sandbox sessions").

The client API (what rollouts import from here): :func:`open_session`,
:func:`open_sessions`, :class:`Session` (``exec``, ``read``, ``write``, ``list``, ``diff``,
``changes``, ``state``, ``close``; a context manager), :class:`Workspace`, :class:`SessionLimits`,
:func:`files_to_grade`, and the errors. The worker's side: ``host.py`` (one slot's session
zygote and sessions), ``slot.py`` (its inbox and leases), ``store.py`` (materialised
workspaces), ``routing.py`` (the Redis keys), and in the sandbox ``harness/session_init.py``
and ``harness/session_files.py``.

The names are loaded on first use (PEP 562), so the worker's modules do not import the
client (and Redis's client) just by living in this package.
"""

import importlib

_NAMES = {
    "FileEntry": "client",
    "Session": "client",
    "SessionClosed": "client",
    "SessionError": "client",
    "SessionFileNotFound": "client",
    "SessionLost": "client",
    "SessionRefused": "client",
    "open_session": "client",
    "open_sessions": "client",
    "WorkspaceState": "client",
    "DEFAULT_RESTORE": "grading",
    "WorkspaceChanges": "grading",
    "files_to_grade": "grading",
    "text_files": "grading",
    "SessionLimits": "limits",
    "Workspace": "workspace",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
