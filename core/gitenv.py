"""The environment every ``git`` Crucible runs gets: no configuration but Crucible's own.

A repository's configuration is code: ``core.fsmonitor``, ``core.hooksPath`` and hooks, filter
drivers (``filter.<name>.smudge``, ``.clean``, ``.process``), ``diff.<name>.textconv``,
``core.sshCommand``, ``core.pager``, ``ext::`` transports all run commands. Git reads the system
and user configuration too. So every ``git`` Crucible runs gets this environment: no system or
global configuration, no system attributes, a home of its own, replace refs ignored, no prompt,
no transport, and the keys that run commands set (on the command line's level, above any
repository's) to values that run nothing. A repository from outside is never the repository git
runs in: its objects are read through a repository of Crucible's own
(``tasks_library.importers.git_objects``).
"""

from __future__ import annotations

import os

# Keys a repository's (or anyone's) configuration could point at a program; given here at the
# command line's level, which wins over every file.
NEUTRAL_CONFIG = {
    "core.hooksPath": os.devnull,
    "core.fsmonitor": "false",
    "core.attributesFile": os.devnull,
    "core.sshCommand": "false",
    "core.pager": "cat",
    "core.askPass": "false",
    "core.editor": "false",
    "protocol.allow": "never",
    "credential.helper": "",
    "gpg.program": "false",
    "commit.gpgSign": "false",
    "tag.gpgSign": "false",
    "submodule.recurse": "false",
    "fetch.recurseSubmodules": "false",
}


def clean_git_env(home: str, **extra: str) -> dict[str, str]:
    """The environment for one ``git`` run: ``PATH`` and ``home`` (a directory of the caller's,
    so no user configuration is found), plus ``extra`` (identity, dates)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_ALLOW_PROTOCOL": "",
        "GIT_OPTIONAL_LOCKS": "0",
        "LC_ALL": "C",
    }
    env["GIT_CONFIG_COUNT"] = str(len(NEUTRAL_CONFIG))
    for index, (key, value) in enumerate(NEUTRAL_CONFIG.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env.update(extra)
    return env
