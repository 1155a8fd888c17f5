"""Tasks, their immutable versions, the environments and test suites they pin, task sets.

Content fields of a version never change after creation: an edit makes a new row
with a new content hash and a ``parent`` link. Validation verdicts are facts *about*
a version and are updated in place.
"""

from __future__ import annotations

import re

from django.db import models
from django.db.models import Func, Value

from sandboxes.process import Limits
from sandboxes.sessions.workspace import PREFIX_BYTES, IndexEntry, Workspace

# Who made a write: a username from the console or API, ``"<os user> (command line)"``
# from a management command. Kept as text so the record outlives the account.
AUTHOR_MAX = 150


class Authored(models.Model):
    """Provenance shared by every immutable version: parent link, change note, author, time."""

    change_note = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=AUTHOR_MAX, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class EnvironmentVersion(Authored):
    """An execution environment: runtime, pinned packages, a container image reference."""

    content_hash = models.CharField(max_length=64, unique=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    name = models.CharField(max_length=100)
    runtime = models.CharField(max_length=40)  # e.g. "python3.11"
    packages = models.JSONField(default=list, blank=True)
    image = models.CharField(max_length=300, blank=True)
    # Packages without a wheel may be built from their sdists, in a build sandbox
    # (sandboxes/environments/source_build.py); False: wheels only, nothing of a package runs.
    source_builds = models.BooleanField(default=False)
    # Debian packages installed into the runtime's Debian root (nginx, cron, sqlite3...), by
    # mmdebstrap in a user namespace (sandboxes/environments/debian.py); python3.13 only.
    debian_packages = models.JSONField(default=list, blank=True)

    CONTENT_FIELDS = ("name", "runtime", "packages", "image")

    def content(self) -> dict:
        """What the content hash covers: name, runtime, packages, image, and ``source_builds``
        and ``debian_packages`` only when set (so earlier environments keep their hashes)."""
        content = {key: getattr(self, key) for key in self.CONTENT_FIELDS}
        if self.source_builds:
            content["source_builds"] = True
        if self.debian_packages:
            content["debian_packages"] = list(self.debian_packages)
        return content

    # The build (tasks_library/environments.py): facts about this version, updated in place.
    BUILD_UNBUILT, BUILD_BUILDING, BUILD_BUILT, BUILD_FAILED = (
        "unbuilt",
        "building",
        "built",
        "failed",
    )
    BUILD_STATUSES = [
        (BUILD_UNBUILT, "not built"),
        (BUILD_BUILDING, "building"),
        (BUILD_BUILT, "built"),
        (BUILD_FAILED, "build failed"),
    ]
    build_status = models.CharField(max_length=16, choices=BUILD_STATUSES, default=BUILD_UNBUILT)
    # The store key its sandboxes run in (packages hash, else root hash, else host-<runtime>).
    build_key = models.CharField(max_length=80, blank=True)
    build_error = models.TextField(blank=True)
    build_log = models.TextField(blank=True)
    # What was installed: [{"name", "version", "layer"}] (pip's, npm's or dpkg's list).
    resolved_packages = models.JSONField(default=list, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)  # bytes of its layers' files
    build_seconds = models.FloatField(null=True, blank=True)  # of the last build that ran
    built_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}@{self.content_hash[:12]}"


class RepositoryWorkspace(models.Model):
    """A repository's file tree, stored once and keyed by its digest.

    ``blob`` is the packed :class:`sandboxes.sessions.workspace.Workspace` (files only, mode
    0644) and ``digest`` its SHA-256: every task version whose files are the same tree points at
    the same row, so a repository of N versions (or N bugs injected into one project) is stored
    once per distinct tree. Test suites of repository tasks keep their hidden test files here
    too. Rows are immutable.
    """

    digest = models.CharField(max_length=64, primary_key=True)
    blob = models.BinaryField()
    file_count = models.PositiveIntegerField()
    size_bytes = models.BigIntegerField()  # bytes of file content
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"workspace@{self.digest[:12]} ({self.file_count} files)"

    def workspace(self) -> Workspace:
        """The unpacked workspace (entries sorted by path)."""
        return Workspace.from_blob(bytes(self.blob))

    def files(self) -> dict[str, bytes]:
        """``{path: content}`` of every file, sorted by path (the whole tree: for grading and
        export; a page or the files API reads :meth:`index` and :meth:`read` instead)."""
        return self.workspace().files()

    def _slice(self, start: int, length: int) -> bytes:
        """``length`` bytes of the blob from ``start`` (0-based), cut out by the database: the
        row's blob is never loaded whole."""
        part = (
            RepositoryWorkspace.objects.filter(pk=self.pk)
            .annotate(part=_Slice("blob", Value(start + 1), Value(length)))
            .values_list("part", flat=True)
            .get()
        )
        return bytes(part or b"")

    def index(self) -> list[IndexEntry]:
        """Every entry's path, kind, size and offset, from the blob's header alone (cached on
        the instance; load rows with ``.defer("blob")`` to keep the blob out of memory)."""
        cached = self.__dict__.get("_index")
        if cached is None:
            length = Workspace.header_length(self._slice(0, PREFIX_BYTES))
            cached = Workspace.index(self._slice(PREFIX_BYTES, length))
            self.__dict__["_index"] = cached
        return cached

    def paths(self) -> list[str]:
        """The file paths, sorted (from the header: no file's bytes are read)."""
        return [e.path for e in self.index() if e.kind == "file"]

    def read(self, path: str, *, max_bytes: int) -> tuple[bytes, int]:
        """One file's first ``max_bytes`` bytes and its whole size, read on its own.

        Raises:
            KeyError: no file at ``path``.
        """
        for entry in self.index():
            if entry.path == path and entry.kind == "file":
                return self._slice(entry.offset, min(entry.size, max_bytes)), entry.size
        raise KeyError(path)


class _Slice(Func):
    """``SUBSTR(blob, start, length)``: SQLite and PostgreSQL (``bytea``) both cut bytes."""

    function = "SUBSTR"
    output_field = models.BinaryField()


class TestSuiteVersion(Authored):
    """Visible tests (shown to the policy) and hidden tests (used for grading).

    ``harness`` names how to run them: ``python-check`` is a HumanEval-style source
    defining ``check(candidate)``, one test per assert-bearing statement of its body;
    ``js-console-assert`` counts ``console.assert`` call sites; ``stdio`` is JSON of
    input/output cases, one test per case. ``timeout_s`` is the wall-clock limit of one
    grading execution, ``test_timeout_s`` that of one test (a call, or a stdio case), in
    seconds (see :meth:`limits`). ``setup_code`` (python-check) is trusted Python run on the
    tests' side before the tests (MBPP's ``test_setup_code``, and the names the tests use
    from the reference module); its imports and class statements also run in the program's
    sandbox, so instances of its classes cross the boundary.

    ``pytest-repo`` (repository tasks) runs a repository's own pytest suite: ``fail_to_pass``
    and ``pass_to_pass`` are the pytest node ids graded (``hidden_test_ids`` is the two lists
    joined), ``hidden_files`` the test files added only at grading, ``test_command`` how pytest
    is called (``pytest`` and arguments); ``visible_tests`` and ``hidden_tests`` are empty (the
    workspace's own test files are the visible tests). These fields enter the content hash only
    when set, so other suites keep their hashes.
    """

    __test__ = False  # not a pytest class, despite its name

    content_hash = models.CharField(max_length=64, unique=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    harness = models.CharField(max_length=40, default="python-check")
    visible_tests = models.TextField()
    hidden_tests = models.TextField()
    visible_test_ids = models.JSONField(default=list)
    hidden_test_ids = models.JSONField(default=list)
    timeout_s = models.FloatField(default=10.0)
    # Seconds one call of the program may take before its test fails and the next runs
    # (python-check only); None: only ``timeout_s`` bounds the run. In the content hash
    # only when set.
    test_timeout_s = models.FloatField(null=True, blank=True)
    # Trusted setup code run before the tests (python-check); in the content hash only when set.
    setup_code = models.TextField(blank=True, default="")
    # pytest-repo only (see the class docstring).
    fail_to_pass = models.JSONField(default=list, blank=True)
    pass_to_pass = models.JSONField(default=list, blank=True)
    hidden_files = models.ForeignKey(
        RepositoryWorkspace,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="test_suites",
    )
    test_command = models.CharField(max_length=500, blank=True, default="")

    CONTENT_FIELDS = (
        "harness",
        "visible_tests",
        "hidden_tests",
        "visible_test_ids",
        "hidden_test_ids",
        "timeout_s",
        "test_timeout_s",
        "setup_code",
        "fail_to_pass",
        "pass_to_pass",
        "hidden_files",
        "test_command",
    )

    def __str__(self) -> str:
        return f"suite@{self.content_hash[:12]}"

    def limits(self):
        """The sandbox :class:`~sandboxes.process.Limits` of one grading execution."""
        return Limits(
            wall_timeout_s=self.timeout_s,
            cpu_s=int(self.timeout_s) + 1,
            test_timeout_s=self.test_timeout_s,
        )


def natural_key(task_id: str) -> str:
    """``task_id`` as a key that sorts the way a reader counts: case-folded, and each run of
    digits written as its length (two digits) then its value without leading zeros, so
    ``HumanEval/2`` < ``HumanEval/10`` < ``HumanEval/100`` and ``a/007`` < ``a/8``."""

    def number(match: re.Match) -> str:
        digits = match.group().lstrip("0") or "0"
        return f"{len(digits):02d}{digits}"

    return _DIGITS.sub(number, task_id.casefold())


_DIGITS = re.compile(r"\d+")


class TaskQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """Django's ``bulk_create``, with each task's :attr:`Task.sort_key` filled in first (a bulk
        write calls no ``save``)."""
        objs = list(objs)
        for task in objs:
            task.sort_key = natural_key(task.task_id)
        return super().bulk_create(objs, *args, **kwargs)


class Task(models.Model):
    """A task's identity across versions (``HumanEval/0``).

    ``sort_key`` is :func:`natural_key` of the id, kept by :meth:`save` and bulk creation: lists
    order by it, so ``HumanEval/2`` comes before ``HumanEval/10``. ``licence`` is the licence of
    the project a task was taken from (repository tasks: the project's SPDX id or licence name),
    ``metadata`` its provenance (repository, base commit, package and version, the injected
    bug); both describe the task, not a version, and are exported with it.
    """

    task_id = models.CharField(max_length=200, unique=True)
    sort_key = models.CharField(max_length=400, db_index=True, editable=False, default="")
    source = models.CharField(max_length=60)
    tags = models.JSONField(default=list, blank=True)
    licence = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TaskQuerySet.as_manager()

    def __str__(self) -> str:
        return self.task_id

    def save(self, *args, **kwargs):
        self.sort_key = natural_key(self.task_id)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "task_id" in update_fields:
            kwargs["update_fields"] = {*update_fields, "sort_key"}
        super().save(*args, **kwargs)


class TaskVersion(Authored):
    """One immutable version of a task, identified by the hash of its content.

    Content (prompt, entry point, reference, environment, test suite) never changes.

    A repository task (SWE-bench's shape; its suite's harness is ``pytest-repo``) has a
    ``workspace``, the buggy repository; its ``prompt`` is the problem statement, its
    ``reference_solution`` the reference patch (a git-style unified diff that turns the
    workspace into the fixed tree) and its ``entry_point`` is empty. See
    :mod:`tasks_library.repositories`.
    What validation, curation and training learn about the version is stored beside
    it and may change: the verdict with its evidence (``report``), the quarantine flag
    and a curator's override, and the pass-rate counts behind its difficulty.
    """

    VERDICT_PENDING = "pending"
    VERDICT_VALID = "valid"
    VERDICT_WEAK_SUITE = "weak_suite"
    VERDICT_BROKEN_REFERENCE = "broken_reference"
    VERDICT_TRIVIAL_PASSES = "trivial_passes"
    VERDICT_FLAKY = "flaky"
    VERDICT_PROMPT_CONTRADICTS = "prompt_contradicts"
    VERDICT_INFRA_ERROR = "infra_error"
    VERDICT_WRONG_TEST_LISTS = "wrong_test_lists"
    VERDICTS = [
        (VERDICT_PENDING, "pending"),
        (VERDICT_VALID, "valid"),
        (VERDICT_WEAK_SUITE, "tests kill too few mutants"),
        (VERDICT_BROKEN_REFERENCE, "reference fails its tests"),
        (VERDICT_TRIVIAL_PASSES, "a trivial solution passes"),
        (VERDICT_FLAKY, "repeat runs of the reference disagree"),
        (VERDICT_PROMPT_CONTRADICTS, "an example in the prompt contradicts the reference"),
        (VERDICT_INFRA_ERROR, "sandbox error during validation"),
        (
            VERDICT_WRONG_TEST_LISTS,
            "FAIL_TO_PASS or PASS_TO_PASS ids disagree with the unpatched repository",
        ),
    ]
    # Verdicts that quarantine a version automatically: it is never sampled for
    # training until a curator overrides with a written reason.
    QUARANTINING = (
        VERDICT_BROKEN_REFERENCE,
        VERDICT_TRIVIAL_PASSES,
        VERDICT_FLAKY,
        VERDICT_PROMPT_CONTRADICTS,
        VERDICT_WRONG_TEST_LISTS,
    )

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="versions")
    content_hash = models.CharField(max_length=64)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    number = models.PositiveIntegerField()
    prompt = models.TextField()
    entry_point = models.CharField(max_length=200)
    reference_solution = models.TextField()
    # Workspace files the program finds beside it ({relative path: UTF-8 text}), e.g. a
    # CSV a data-analysis task reads. Part of the content hash only when present.
    files = models.JSONField(default=dict, blank=True)
    # A repository task's buggy repository (stored once per tree); in the content hash (as
    # its digest) only when set.
    workspace = models.ForeignKey(
        RepositoryWorkspace,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="task_versions",
    )
    environment = models.ForeignKey(EnvironmentVersion, on_delete=models.PROTECT)
    test_suite = models.ForeignKey(TestSuiteVersion, on_delete=models.PROTECT)
    # The task family. A terminal task (Harbor's layout; tasks_library/terminal) keeps its whole
    # task directory as its ``workspace``, its instruction as ``prompt``, solution/solve.sh as
    # ``reference_solution``, and a suite of harness ``terminal`` whose hidden files are tests/.
    KIND_FUNCTION, KIND_REPOSITORY, KIND_TERMINAL = "function", "repository", "terminal"
    KINDS = [
        (KIND_FUNCTION, "function"),
        (KIND_REPOSITORY, "repository"),
        (KIND_TERMINAL, "terminal"),
    ]
    kind = models.CharField(max_length=16, choices=KINDS, default=KIND_FUNCTION)

    verdict = models.CharField(max_length=32, choices=VERDICTS, default=VERDICT_PENDING)
    verdict_reasons = models.JSONField(default=list, blank=True)
    # Per stage of the validation pipeline: what ran and the evidence (failing test,
    # surviving mutant, contradicting example); see tasks_library.validation.pipeline.
    report = models.JSONField(default=dict, blank=True)
    mutation_score = models.FloatField(null=True, blank=True)  # killed / mutants, in [0, 1]
    validated_at = models.DateTimeField(null=True, blank=True)

    quarantined = models.BooleanField(default=False)
    quarantine_reason = models.TextField(blank=True)
    override_reason = models.TextField(blank=True)  # a curator's written reason to train anyway
    curated_by = models.CharField(max_length=AUTHOR_MAX, blank=True)
    curated_at = models.DateTimeField(null=True, blank=True)

    # Difficulty: successes and trials of graded attempts (evaluations and rollouts);
    # the pass rate's posterior is Beta(1 + successes, 1 + trials - successes).
    attempts_passed = models.PositiveIntegerField(default=0)
    attempts_total = models.PositiveIntegerField(default=0)

    CONTENT_FIELDS = ("prompt", "entry_point", "reference_solution", "files", "workspace")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "content_hash"], name="unique_task_content"),
            models.UniqueConstraint(fields=["task", "number"], name="unique_task_version_number"),
        ]
        indexes = [
            models.Index(fields=["verdict"], name="taskversion_verdict"),
            models.Index(fields=["quarantined"], name="taskversion_quarantined"),
        ]
        ordering = ["task_id", "number"]

    def __str__(self) -> str:
        return f"{self.task.task_id} v{self.number}"

    @property
    def version(self) -> str:
        """The short content hash users see as the version id."""
        return self.content_hash[:12]

    @property
    def is_repository(self) -> bool:
        """A repository task (a workspace, FAIL_TO_PASS and PASS_TO_PASS ids)."""
        return self.kind == self.KIND_REPOSITORY

    @property
    def is_terminal(self) -> bool:
        """A terminal task (a Harbor task directory, verified by the state it leaves)."""
        return self.kind == self.KIND_TERMINAL

    @property
    def trainable(self) -> bool:
        """Validated, and not quarantined (or a curator overrode the quarantine)."""
        return not self.quarantined and self.verdict not in (
            self.VERDICT_PENDING,
            self.VERDICT_INFRA_ERROR,
        )


class TaskSet(models.Model):
    """A named, pinned list of task versions: what a run trains or evaluates on."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    task_versions = models.ManyToManyField(
        TaskVersion, through="TaskSetMember", related_name="task_sets"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class TaskSetVersion(Authored):
    """One immutable pinning of a task set: the ordered task version hashes it held.

    A new one is recorded whenever the set's pins change; a training run records the
    one it used, so it can be reproduced after the set moves on.
    """

    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    task_versions = models.JSONField(default=list)  # [[task_id, task version content hash], ...]

    class Meta:
        ordering = ["task_set_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["task_set", "number"], name="unique_task_set_version_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_set.name} v{self.number}"


class TaskSetMember(models.Model):
    task_set = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="members")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["task_set", "task_version"], name="unique_member"),
        ]


class ReferenceProfile(models.Model):
    """How the reference solution of a task version performs on its hidden tests, measured in the
    sandbox: the baseline of the efficiency reward. Measured once and kept (the version is
    immutable).

    ``growth_exponent`` is the fitted exponent of time against input size where the task has
    inputs of growing size; null otherwise.
    """

    task_version = models.OneToOneField(
        TaskVersion, on_delete=models.CASCADE, related_name="reference_profile"
    )
    wall_ms = models.FloatField()
    cpu_ms = models.FloatField(default=0.0)
    peak_memory_bytes = models.BigIntegerField(default=0)
    growth_exponent = models.FloatField(null=True, blank=True)
    runs = models.PositiveIntegerField(default=1)
    details = models.JSONField(default=dict, blank=True)
    measured_at = models.DateTimeField(auto_now_add=True)


class ValidationJob(models.Model):
    """One run of the validation pipeline on some task versions in the background (Celery), so
    that a page or a script can follow its progress and read its result without waiting on it.

    ``stage`` is what runs now (a pipeline stage, or ``storing``); ``stages_done`` of
    ``stages_total`` the progress; ``results`` one ``{"id", "task_id", "number", "verdict",
    "quarantined", "reasons", "mutation_score"}`` per version once done; ``error`` why it failed.
    """

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]

    version_ids = models.JSONField(default=list)
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    stage = models.CharField(max_length=40, blank=True)
    stages_done = models.PositiveIntegerField(default=0)
    stages_total = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    celery_id = models.CharField(max_length=100, blank=True)
    created_by = models.CharField(max_length=AUTHOR_MAX, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"validation job {self.pk} ({self.status})"
