"""The sandbox side of repository tasks: patches between file trees, the agent's single-commit
git workspace, and grading a final workspace by FAIL_TO_PASS and PASS_TO_PASS test ids in a
fresh sandbox (README, "Repository grading").

:func:`make_patch`/:func:`apply_patch` (``patches.py``) move between file trees and git-style
diffs; :func:`git_workspace` builds the agent's workspace (the files and a fresh single-commit
git repository); :func:`grade_repository` grades a submission's final files by FAIL_TO_PASS and
PASS_TO_PASS test ids in a fresh session; :func:`run_suite` runs a whole suite on the same
machinery (for the generator and validation); :func:`is_test_path` says which files a grading
takes from the task version. Names load on first use (PEP 562), as in ``sandboxes.sessions``.
"""

import importlib

_NAMES = {
    "GitWorkspaceError": "git",
    "git_workspace": "git",
    "RepositoryResult": "grading",
    "RepositoryRunError": "grading",
    "RepositoryTests": "grading",
    "grade_patch": "grading",
    "grade_repository": "grading",
    "id_status": "grading",
    "run_suite": "grading",
    "PatchError": "patches",
    "apply_patch": "patches",
    "make_patch": "patches",
    "patched_paths": "patches",
    "grading_files": "paths",
    "is_test_path": "paths",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
