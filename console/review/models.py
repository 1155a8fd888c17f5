"""Human spot-check review: queues of sampled trajectories, assignments, labels, and what labels
feed back.

A :class:`ReviewQueue` samples trajectories (of one run, or across runs) with a strategy
(``console.review.sampling``) into ordered :class:`ReviewItem` rows; each item is assigned to
``reviewers_per_item`` people (:class:`ReviewAssignment`); each assigned reviewer gives one
:class:`ReviewLabel` per item, from the queue's label set. The queue's consensus rule decides an
item's label (``quorum`` reviewers agreeing, or a curator confirming; ``ReviewItem.decision``), and
only a decided label feeds back (``console.review.services.review_label``): ``broken_task``
quarantines the task version for a curator to confirm, ``reward_hack`` adds a
:class:`HackExample` (exportable to the hack regression corpus) and flags the trajectory.
A reviewer may turn a trajectory into a :class:`TaskDraft`, which a curator submits to the
task library.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tasks_library.models import TaskVersion
from training.models import TrainingRun, Trajectory

# Sampling strategies (console.review.sampling implements one function each).
UNIFORM = "uniform"
HIGHEST_REWARD = "highest_reward"
FLAGGED_FIRST = "flagged_first"
MONITOR_SCORE = "monitor_score"
STRATIFIED_TASK = "stratified_task"
STRATIFIED_DIFFICULTY = "stratified_difficulty"
VERIFIER_DISAGREEMENT = "verifier_disagreement"
STRATEGIES = [
    (UNIFORM, "uniform (seeded random)"),
    (HIGHEST_REWARD, "highest reward first"),
    (FLAGGED_FIRST, "flagged first (then by monitor score)"),
    (MONITOR_SCORE, "most suspicious first (monitor score)"),
    (STRATIFIED_TASK, "stratified by task version (round robin)"),
    (STRATIFIED_DIFFICULTY, "stratified by difficulty bucket (round robin)"),
    (VERIFIER_DISAGREEMENT, "verifier disagreement (tasks whose labels contradicted the reward)"),
]

# Labels, in the order of the labelling page's keyboard shortcuts 1-5.
CORRECT = "correct"
REWARD_HACK = "reward_hack"
BROKEN_TASK = "broken_task"
AMBIGUOUS_TASK = "ambiguous_task"
OTHER = "other"
LABELS = [
    (CORRECT, "correct"),
    (REWARD_HACK, "reward hack"),
    (BROKEN_TASK, "broken task"),
    (AMBIGUOUS_TASK, "ambiguous task"),
    (OTHER, "other"),
]
LABEL_NAMES = [value for value, _ in LABELS]
# Labels that feed back once decided (console.review.services): a broken task is quarantined, a
# reward hack joins the hack corpus. A queue's label set may hold them or not.
FEEDBACK_LABELS = (BROKEN_TASK, REWARD_HACK)
# The built-in labels that say something is wrong: a note is required with them.
NOTE_REQUIRED = (REWARD_HACK, BROKEN_TASK, AMBIGUOUS_TASK, OTHER)
DEFAULT_LABEL_SET = [{"value": value, "title": title} for value, title in LABELS]
MAX_LABELS = 9  # keys 1-9 on the labelling page

# Consensus rules: when an item's labels feed back (quarantine, hack corpus).
QUORUM = "quorum"
CURATOR = "curator"
CONSENSUS_RULES = [
    (QUORUM, "a quorum of its reviewers agree (or a curator confirms)"),
    (CURATOR, "a curator confirms"),
]

# The tables keep the names the console app created them with (console 0001) before review
# became an app of its own (review 0001 takes them over without touching the database).


class ReviewQueue(models.Model):
    """A spot-check of ``size`` trajectories sampled by ``strategy`` (seeded), each for
    ``reviewers_per_item`` people.

    ``run`` is null for a queue across runs. ``filters`` narrows the candidates before sampling
    (keys of :func:`training.selectors.trajectory_list`: ``step_min``, ``step_max``, ``task``,
    ``reward_min``, ``reward_max``, ``flag``, ``status``).
    """

    name = models.CharField(max_length=200)
    run = models.ForeignKey(
        TrainingRun, null=True, blank=True, on_delete=models.CASCADE, related_name="review_queues"
    )
    strategy = models.CharField(max_length=40, choices=STRATEGIES)
    size = models.PositiveIntegerField()
    reviewers_per_item = models.PositiveIntegerField(default=1)
    seed = models.IntegerField(default=0)
    filters = models.JSONField(default=dict, blank=True)
    # The labels its reviewers choose from, in key order: [{"value", "title"}] (1-9 of them).
    labels = models.JSONField(default=list, blank=True)
    # When a label feeds back (quarantine a broken task, a reward hack to the hack corpus):
    # ``quorum`` reviewers of the item agree on it (or a curator confirms), or only a curator's
    # confirmation (``consensus == "curator"``).
    consensus = models.CharField(max_length=20, choices=CONSENSUS_RULES, default=QUORUM)
    quorum = models.PositiveIntegerField(default=2)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "console_reviewqueue"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"review queue {self.pk} ({self.name})"

    @property
    def label_set(self) -> list[dict]:
        """The queue's labels, ``[{"value", "title"}]`` (the built-in five when none were
        chosen)."""
        return self.labels or DEFAULT_LABEL_SET

    def label_title(self, value: str) -> str:
        return next((lab["title"] for lab in self.label_set if lab["value"] == value), value)

    @property
    def consensus_text(self) -> str:
        """The rule in words, as the queue and labelling pages state it."""
        feeds = [lab["title"] for lab in self.label_set if lab["value"] in FEEDBACK_LABELS]
        what = (
            " and ".join(f"“{title}”" for title in feeds) + " labels feed back"
            if feeds
            else "no label of this queue feeds back"
        )
        if self.consensus == CURATOR:
            return (
                f"{what} (quarantine the task version, add the trajectory to the hack corpus) "
                "only once a curator confirms; reviewers' labels alone change nothing."
            )
        alone = " (one reviewer's label is enough)" if self.quorum == 1 else ""
        return (
            f"{what} (quarantine the task version, add the trajectory to the hack corpus) once "
            f"{self.quorum} of the item's reviewers agree{alone}, or a curator confirms."
        )


class ReviewItem(models.Model):
    """One sampled trajectory of a queue, at ``position`` (0 first); ``reason`` says why it was
    picked."""

    queue = models.ForeignKey(ReviewQueue, on_delete=models.CASCADE, related_name="items")
    trajectory = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="review_items"
    )
    position = models.PositiveIntegerField()
    reason = models.CharField(max_length=300, blank=True)
    # The label the queue's consensus rule decided ("" while none is), how (``quorum`` or
    # ``curator``), and what it fed back (``{"quarantined": true, ...}``, ``{"hack_example": id}``).
    decision = models.CharField(max_length=20, blank=True)
    decided_how = models.CharField(max_length=20, blank=True)
    feedback = models.JSONField(default=dict, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirm_note = models.TextField(blank=True)

    class Meta:
        db_table = "console_reviewitem"
        ordering = ["queue_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "trajectory"], name="unique_review_item_trajectory"
            ),
            models.UniqueConstraint(
                fields=["queue", "position"], name="unique_review_item_position"
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.position + 1} of queue {self.queue_id}"


class ReviewAssignment(models.Model):
    """An item given to one reviewer; ``completed_at`` is set when they label it."""

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_assignments"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assigned_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "console_reviewassignment"
        ordering = ["item_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "reviewer"], name="unique_review_assignment")
        ]


class ReviewLabel(models.Model):
    """One reviewer's verdict on one item (and so on its trajectory); relabelling updates it.

    ``feedback`` records what the label did (``{"quarantined": true}``,
    ``{"hack_example": id}``...).
    """

    item = models.ForeignKey(
        ReviewItem, null=True, blank=True, on_delete=models.CASCADE, related_name="labels"
    )
    trajectory = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="review_labels"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_labels"
    )
    label = models.CharField(max_length=20)  # a value of the queue's label set
    note = models.TextField(blank=True)
    # The turn the label points at (its Turn.index, 0-based; the replay numbers it turn + 1),
    # or None for the whole trajectory.
    turn = models.PositiveIntegerField(null=True, blank=True)
    feedback = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "console_reviewlabel"
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "reviewer"], name="unique_review_label")
        ]
        indexes = [models.Index(fields=["trajectory", "label"])]


class HackExample(models.Model):
    """A reward hack a reviewer found: the trajectory's final code on its task version.

    ``flags`` are the detector flags the trajectory carried when it was labelled (empty: no
    detector saw it, a miss the corpus should record). ``export_hack_corpus`` writes these rows
    in the format of ``tests/training/hack_corpus/corpus.py``.
    """

    trajectory = models.OneToOneField(
        Trajectory, null=True, blank=True, on_delete=models.SET_NULL, related_name="hack_example"
    )
    task_version = models.ForeignKey(
        TaskVersion, on_delete=models.PROTECT, related_name="hack_examples"
    )
    code = models.TextField()
    label = models.CharField(max_length=40, default=REWARD_HACK)
    flags = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "console_hackexample"
        ordering = ["id"]


class TaskDraft(models.Model):
    """A new task a reviewer wrote from a trajectory; a curator submits it to the task library.

    ``tests`` are the reviewer's hidden tests (HumanEval ``check(candidate)`` for ``python-check``);
    on submission the draft becomes a task of source ``review-drafts`` (``task_version``).
    """

    DRAFT = "draft"
    SUBMITTED = "submitted"
    STATUSES = [(DRAFT, "draft"), (SUBMITTED, "submitted")]

    from_trajectory = models.ForeignKey(
        Trajectory, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_drafts"
    )
    task_id = models.CharField(max_length=200)
    prompt = models.TextField()
    entry_point = models.CharField(max_length=200)
    reference_solution = models.TextField()
    files = models.JSONField(default=dict, blank=True)
    tests = models.TextField()
    harness = models.CharField(max_length=40, default="python-check")
    status = models.CharField(max_length=20, choices=STATUSES, default=DRAFT)
    task_version = models.ForeignKey(
        TaskVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "console_taskdraft"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"task draft {self.pk} ({self.task_id}, {self.status})"
