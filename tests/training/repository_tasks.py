"""Repository tasks as the trainer sees them (a ``TaskSpec`` of kind ``repository``), for the tests
that roll out, grade or score one."""

from __future__ import annotations

from training.rollout import TaskSpec


def repository_task(
    files: dict,
    tests,
    *,
    task_version_id: int,
    environment: dict | None = None,
    reference_patch: str = "",
    prompt: str = "clamp(value, low, high) must return high when value >= high (inclusive).",
) -> TaskSpec:
    """A repository task version's spec: ``files`` the starting workspace, ``tests`` its
    ``RepositoryTests``."""
    return TaskSpec(
        task_version_id=task_version_id,
        prompt=prompt,
        entry_point="",
        visible_tests="",
        hidden_tests="",
        timeout_s=60.0,
        files=files,
        reference_solution=reference_patch,
        environment=environment,
        kind="repository",
        repository=tests,
    )
