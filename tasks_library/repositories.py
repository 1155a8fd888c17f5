"""Repository tasks (SWE-bench's shape): a buggy repository workspace, a problem statement,
FAIL_TO_PASS and PASS_TO_PASS test ids, hidden test files and the reference patch.

:class:`RepositoryTaskRecord` is what every source of repository tasks produces (the
SWE-bench JSONL importer, the bug generator) before it is stored as a task version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TEST_COMMAND = "pytest"


@dataclass
class RepositoryTaskRecord:
    """One repository task before import.

    Attributes:
        task_id: the task's id (``repo-bugs/toolz-1.0.0/0007``).
        problem_statement: what the user sees: the misbehaviour, as an issue describes it.
        files: the buggy workspace, ``{path: content}``, without ``.git``.
        reference_patch: the fix, a git-style unified diff (``sandboxes.repository.patches``).
        fail_to_pass: pytest node ids that fail on ``files`` and pass with the patch.
        pass_to_pass: pytest node ids that pass on both.
        hidden_files: test files added only at grading (``{path: content}``).
        test_command: how the suite runs (``pytest`` and its arguments).
        environment: the environment spec: ``{"name", "runtime", "packages"}``.
        source: where it came from (``repo-bugs``, ``swe-bench``).
        licence: the project's licence (SPDX id or the licence's name).
        tags: free labels; metadata: provenance (package, version, mutation, file, function).
    """

    task_id: str
    problem_statement: str
    files: dict[str, bytes]
    reference_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    environment: dict
    hidden_files: dict[str, bytes] = field(default_factory=dict)
    test_command: str = DEFAULT_TEST_COMMAND
    source: str = "repo-bugs"
    licence: str = ""
    tags: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
