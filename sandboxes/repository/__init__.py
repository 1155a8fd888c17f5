"""The sandbox side of repository tasks: patches between file trees, the agent's single-commit
git workspace, and grading a final workspace by FAIL_TO_PASS and PASS_TO_PASS test ids in a
fresh sandbox (README, "Repository grading").

:func:`make_patch`/:func:`apply_patch` (``patches.py``) move between file trees and git-style
diffs; :func:`git_workspace` builds the agent's workspace (the files and a fresh single-commit
git repository); :func:`grade_repository` grades a submission's final files by FAIL_TO_PASS and
PASS_TO_PASS test ids in a fresh session; :func:`run_suite` runs a whole suite on the same
machinery (for the generator and validation); :func:`is_test_path` says which files a grading
takes from the task version. Importing it loads no Redis client (the session client is
imported when a grading opens its session).
"""

from sandboxes.repository.git import GitWorkspaceError, git_workspace
from sandboxes.repository.grading import (
    RepositoryResult,
    RepositoryRunError,
    RepositoryTests,
    SuiteReport,
    grade_patch,
    grade_repository,
    id_status,
    run_suite,
    run_suite_report,
)
from sandboxes.repository.patches import PatchError, apply_patch, make_patch, patched_paths
from sandboxes.repository.paths import grading_files, is_test_path

__all__ = [
    "GitWorkspaceError",
    "PatchError",
    "RepositoryResult",
    "RepositoryRunError",
    "RepositoryTests",
    "apply_patch",
    "git_workspace",
    "grade_patch",
    "grade_repository",
    "grading_files",
    "id_status",
    "is_test_path",
    "make_patch",
    "patched_paths",
    "run_suite",
    "run_suite_report",
    "SuiteReport",
]
