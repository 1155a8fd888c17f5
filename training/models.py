"""Training runs, their status history, per-step metrics, trajectories and turns."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.packed import PackedArrayField
from tasks_library.models import TaskSet, TaskSetVersion, TaskVersion
from training.turn_outputs import outputs_restored


class TrainingRun(models.Model):
    """A training run: its configuration, the exact task versions it trains on, its status.

    ``name``, ``description`` and ``tags`` are the user's words for it (the runs table shows,
    filters and sorts by them); ``launched_by`` who launched it: a username from the console or the
    API, ``"<os user> (command line)"`` from a management command (text, so it outlives the
    account).
    """

    PENDING = "pending"
    LAUNCHING = "launching"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    STATUSES = [
        (s, s) for s in (PENDING, LAUNCHING, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
    ]
    TERMINAL = (SUCCEEDED, FAILED, CANCELLED)

    task_set = models.ForeignKey(TaskSet, on_delete=models.PROTECT, related_name="runs")
    # The exact task versions the run used, so it can be reproduced after the set changes.
    task_versions = models.ManyToManyField(TaskVersion, related_name="runs")
    task_set_version = models.ForeignKey(
        TaskSetVersion, null=True, on_delete=models.PROTECT, related_name="runs"
    )
    # The held-out set the run evaluates on every ``eval_every`` steps and never trains on.
    eval_task_set = models.ForeignKey(
        TaskSet, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    launched_by = models.CharField(max_length=150, blank=True)
    config = models.JSONField(default=dict)
    backend = models.CharField(max_length=20, default="local")
    backend_ref = models.CharField(max_length=200, blank=True)  # a pid, or a Job name
    status = models.CharField(max_length=20, choices=STATUSES, default=PENDING)
    status_reason = models.TextField(blank=True)
    total_steps = models.PositiveIntegerField()
    summary = models.JSONField(default=dict, blank=True)  # e.g. SFT warm-start figures
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def title(self) -> str:
        """``run 7 · warm-start-sweep`` (the name when it has one)."""
        return f"run {self.pk} · {self.name}" if self.name else f"run {self.pk}"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class RunTransition(models.Model):
    """One status change of a run, with when and why."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=20)
    to_status = models.CharField(max_length=20)
    reason = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]


REWARD_BINS = [i / 10 for i in range(11)]
"""The edges of a step's reward histogram (``StepMetric.reward_histogram``): ten bins on [0, 1],
the last one closed. The trainer's record of a step and every reader of the histograms use these."""


class StepMetric(models.Model):
    """The metrics of one finished step; ``seq`` orders a run's events for back-fill.

    ``metrics`` holds cleanrl-style names (``reward/mean``, ``loss/policy``);
    ``reward_histogram`` holds counts over fixed bins (edges in ``reward_bins``),
    so the console never receives raw reward lists.
    """

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="steps")
    step = models.PositiveIntegerField()
    phase = models.CharField(max_length=10, default="rl")  # "sft" or "rl"
    reward_mean = models.FloatField()
    reward_histogram = models.JSONField(default=list)
    reward_bins = models.JSONField(default=list)
    metrics = models.JSONField(default=dict)
    # The trainer's phases and the sandbox pool over the step's wall-clock window
    # (training.phase.PhaseTracker.take_step: phase segments, pool and queue samples).
    timeline = models.JSONField(default=dict, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="unique_run_step")]


class EpisodeOpening(models.Model):
    """What an agent's episode opened with, as the policy saw it before its first turn: the
    system prompt, the user prompt (the problem statement) and the tools' schemas. Stored once
    per distinct opening (``digest``: SHA-256 of the three as canonical JSON): every trajectory
    of a task shares it."""

    digest = models.CharField(max_length=64, primary_key=True)
    system = models.TextField(blank=True)
    user = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Trajectory(models.Model):
    """One multi-turn rollout of one task version inside a group.

    ``opening`` is the agent episode's opening (None for a completion rollout, whose prompt is
    the task version's); ``grading`` the hidden-test grading of its final code or workspace:
    ``{"status", "tests": [{"id", "passed", "error"}]}`` (``{}``: graded before it was kept).
    """

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="trajectories")
    step = models.PositiveIntegerField()
    group = models.PositiveIntegerField()
    index_in_group = models.PositiveIntegerField()
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT)
    status = models.CharField(max_length=20)  # the grading execution's status
    reward = models.FloatField()
    reward_components = models.JSONField(default=dict)  # name -> value in [0, 1] (before weights)
    advantage = models.FloatField(default=0.0)
    flags = models.JSONField(default=list)
    flag_evidence = models.JSONField(default=dict)  # flag -> what the detector saw
    tests_passed = models.PositiveIntegerField(default=0)
    tests_total = models.PositiveIntegerField(default=0)
    prompt_token_ids = models.JSONField(default=list)
    final_code = models.TextField(blank=True)
    # The fresh test inputs its grading drew (training/fresh_tests.py): {"seed", "inputs" (the
    # argument tuples' repr), "outputs" (the reference's repr), "note"}; empty: fixed tests only.
    fresh_tests = models.JSONField(default=dict, blank=True)
    opening = models.ForeignKey(
        EpisodeOpening, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    grading = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step", "group", "index_in_group"]
        indexes = [models.Index(fields=["run", "step"])]


class Turn(models.Model):
    """One think-execute-observe turn: the sampled tokens and what the sandbox said.

    ``token_ids`` are exactly the ids the policy sampled (token in, token out);
    ``observation_token_ids`` are the ids appended after it, masked out of the loss. The three
    arrays are packed binary (``core.packed``: int32 ids, float64 log-probs), not JSON: a turn
    carries over a thousand ids and a step writes tens of thousands of turns.
    """

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    policy_text = models.TextField()
    token_ids = PackedArrayField(typecode="i")
    logprobs = PackedArrayField(typecode="d")
    action = models.CharField(max_length=20, default="run_code")
    code = models.TextField(blank=True)
    observation = models.TextField(blank=True)
    observation_token_ids = PackedArrayField(typecode="i")
    sandbox_status = models.CharField(max_length=20, blank=True)
    sandbox_result = models.JSONField(default=dict)

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "index"], name="unique_turn")]

    @classmethod
    def from_db(cls, db, field_names, values):
        """A loaded turn, its tool calls' outputs put back from the observation
        (``training.turn_outputs``: the writer stores each output once)."""
        turn = super().from_db(db, field_names, values)
        if "sandbox_result" in field_names and "observation" in field_names:
            turn.sandbox_result = outputs_restored(turn.sandbox_result, turn.observation)
        return turn


class MonitorScore(models.Model):
    """A monitor's suspicion that a trajectory hacks its reward: a score in [0, 1] and why.

    ``monitor`` names the monitor (``rules``: the detectors; ``llm:<model>``: an LLM judge).
    Review queues put the highest scores first.
    """

    trajectory = models.ForeignKey(
        Trajectory, on_delete=models.CASCADE, related_name="monitor_scores"
    )
    monitor = models.CharField(max_length=120)
    score = models.FloatField()
    reason = models.TextField(blank=True)
    details = models.JSONField(
        default=dict, blank=True
    )  # e.g. the LLM's raw answer, tokens, latency
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-score", "id"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "monitor"], name="unique_monitor_score")
        ]
        indexes = [models.Index(fields=["monitor", "-score"])]


class HeldOutEvaluation(models.Model):
    """The policy's score on a run's held-out evaluation task set at one step (never trained on).

    ``pass_at_k`` maps k (as text) to the unbiased pass@k estimate (Chen et al. 2021) over the
    set's tasks with ``samples_per_task`` samples each; ``reward_mean`` is the mean reward.
    """

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="evaluations")
    step = models.PositiveIntegerField()
    task_set = models.ForeignKey(TaskSet, on_delete=models.PROTECT, related_name="+")
    tasks = models.PositiveIntegerField()
    samples_per_task = models.PositiveIntegerField()
    pass_at_k = models.JSONField(default=dict)
    reward_mean = models.FloatField()
    dropped = models.PositiveIntegerField(default=0)  # samples lost to infra errors, not scored
    seconds = models.FloatField(default=0.0)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step"]
        constraints = [
            models.UniqueConstraint(fields=["run", "step"], name="unique_run_evaluation_step")
        ]


class Alert(models.Model):
    """A drift or onset alert on one of a run's streams, with the evidence that raised it.

    ``stream`` is the metric watched (``reward/mean``, ``reward/correctness``, ``flags/rate``...);
    ``detector`` the test (``adwin``, ``page_hinkley_up``, ``js_divergence``, ``wasserstein``,
    ``onset:train_up_heldout_down``...); ``statistic`` its value and ``threshold`` the bound it
    crossed; ``window`` in steps. Alerts of one (stream, detector) within the cool-down are
    merged into the first (``repeats`` counts them) rather than stored again.
    """

    INFO, WARNING, CRITICAL = "info", "warning", "critical"
    SEVERITIES = [(s, s) for s in (INFO, WARNING, CRITICAL)]

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="alerts")
    step = models.PositiveIntegerField()
    last_step = models.PositiveIntegerField()  # the latest step a merged repeat fired at
    stream = models.CharField(max_length=80)
    detector = models.CharField(max_length=80)
    statistic = models.FloatField()
    threshold = models.FloatField()
    window = models.PositiveIntegerField(default=0)
    severity = models.CharField(max_length=10, choices=SEVERITIES, default=WARNING)
    message = models.TextField()
    repeats = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledgement_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["run", "stream", "detector", "-step"])]


class RunWarning(models.Model):
    """Something that makes a run train less than it was asked to, said on its page and in the
    runs table (``training/run_warnings.py`` says when each kind is raised).

    One row per (run, kind), kept up to date as the run goes on: ``first_step`` and
    ``last_step`` the steps it was seen at (None for what the trainer found before the first
    step), ``steps`` how many steps it held at, ``details`` the evidence (the dropped tasks with
    their prompt lengths, the steps with their counts).
    """

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="warnings")
    kind = models.CharField(max_length=60)
    message = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    first_step = models.PositiveIntegerField(null=True, blank=True)
    last_step = models.PositiveIntegerField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "kind"], name="unique_run_warning_kind")
        ]
