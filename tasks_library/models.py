"""Tasks, their immutable versions, the environments and test suites they pin, task sets.

Content fields of a version never change after creation: an edit makes a new row
with a new content hash and a ``parent`` link. Validation verdicts are facts *about*
a version and are updated in place.
"""

from __future__ import annotations

from django.db import models


class EnvironmentVersion(models.Model):
    """An execution environment: runtime, pinned packages, a container image reference."""

    content_hash = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=100)
    runtime = models.CharField(max_length=40)  # e.g. "python3.11"
    packages = models.JSONField(default=list, blank=True)
    image = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name}@{self.content_hash[:12]}"


class TestSuiteVersion(models.Model):
    """Visible tests (shown to the policy) and hidden tests (used for grading).

    ``harness`` names how to run them: ``python-check`` is a HumanEval-style source
    defining ``check(candidate)``, one test per assert-bearing statement of its body.
    """

    __test__ = False  # not a pytest class, despite its name

    content_hash = models.CharField(max_length=64, unique=True)
    harness = models.CharField(max_length=40, default="python-check")
    visible_tests = models.TextField()
    hidden_tests = models.TextField()
    visible_test_ids = models.JSONField(default=list)
    hidden_test_ids = models.JSONField(default=list)
    timeout_s = models.FloatField(default=10.0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"suite@{self.content_hash[:12]}"


class Task(models.Model):
    """A task's identity across versions (``HumanEval/0``)."""

    task_id = models.CharField(max_length=200, unique=True)
    source = models.CharField(max_length=60)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.task_id


class TaskVersion(models.Model):
    """One immutable version of a task, identified by the hash of its content."""

    VERDICT_PENDING = "pending"
    VERDICT_VALID = "valid"
    VERDICT_BROKEN_REFERENCE = "broken_reference"
    VERDICT_TRIVIAL_PASSES = "trivial_passes"
    VERDICT_INFRA_ERROR = "infra_error"
    VERDICTS = [
        (VERDICT_PENDING, "pending"),
        (VERDICT_VALID, "valid"),
        (VERDICT_BROKEN_REFERENCE, "reference fails its tests"),
        (VERDICT_TRIVIAL_PASSES, "a trivial solution passes"),
        (VERDICT_INFRA_ERROR, "sandbox error during validation"),
    ]

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="versions")
    content_hash = models.CharField(max_length=64)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    number = models.PositiveIntegerField()
    prompt = models.TextField()
    entry_point = models.CharField(max_length=200)
    reference_solution = models.TextField()
    environment = models.ForeignKey(EnvironmentVersion, on_delete=models.PROTECT)
    test_suite = models.ForeignKey(TestSuiteVersion, on_delete=models.PROTECT)
    change_note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    verdict = models.CharField(max_length=32, choices=VERDICTS, default=VERDICT_PENDING)
    verdict_reasons = models.JSONField(default=list, blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "content_hash"], name="unique_task_content"),
            models.UniqueConstraint(fields=["task", "number"], name="unique_task_version_number"),
        ]
        ordering = ["task_id", "number"]

    def __str__(self) -> str:
        return f"{self.task.task_id} v{self.number}"

    @property
    def version(self) -> str:
        """The short content hash users see as the version id."""
        return self.content_hash[:12]


class TaskSet(models.Model):
    """A named, pinned list of task versions: what a run trains or evaluates on."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    task_versions = models.ManyToManyField(TaskVersion, through="TaskSetMember", related_name="task_sets")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class TaskSetMember(models.Model):
    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="members")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "task_version"], name="unique_member"),
        ]
