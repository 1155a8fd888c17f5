"""From a graded rollout to its reward: components, hack flags, the run's hack policy.

After grading, each rollout that was graded becomes a
:class:`training.rewards.base.GradedSubmission` (final code, hidden-test result, the last
visible-test result the policy saw, the reference's profile). The run's reward
components are computed on it (``reward_weights``: the reward is their weighted mean),
the hack detectors flag it with evidence, and under ``hack_policy="zero"`` a flagged
rollout's reward becomes 0. Every component is kept on the trajectory either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandboxes import result as R
from training.hacks import detect, flags_record, probes_run
from training.rewards.base import GradedSubmission, ReferenceStats
from training.rewards.registry import reward_components_batch, weighted_total


@dataclass
class Scorer:
    """How a run turns graded rollouts into rewards.

    Attributes:
        weights: reward component name -> weight (``RunConfig.reward_weights``).
        hack_policy: ``flag`` (keep the reward) or ``zero``.
        references: task version id -> the reference's profile (efficiency baselines).
        detect_hacks: run the hack detectors (training/hacks) on every graded rollout.
    """

    weights: dict = field(default_factory=lambda: {"correctness": 1.0})
    hack_policy: str = "flag"
    references: dict[int, ReferenceStats] = field(default_factory=dict)
    detect_hacks: bool = True

    def submission(self, rollout, grade: R.ExecutionResult) -> GradedSubmission:
        return GradedSubmission(
            task=rollout.task,
            code=rollout.final_code,
            grade=grade,
            visible=rollout.last_visible,
            reference=self.references.get(rollout.task.task_version_id),
            extra={"changed": dict(getattr(rollout, "changed_code", None) or {})},
        )

    def score(self, rollouts: list, grades: list[R.ExecutionResult]) -> None:
        """Set each graded rollout's components, flags (with evidence) and reward, in place."""
        submissions = [self.submission(r, g) for r, g in zip(rollouts, grades)]
        batch = reward_components_batch(submissions, self.weights)
        for rollout, _submission, components in zip(rollouts, submissions, batch):
            rollout.reward_components = components
            rollout.reward = weighted_total(components, self.weights)
        if not self.detect_hacks:
            return
        probes_run(submissions)  # the patched-return probes of the whole batch, queued at once
        for rollout, submission in zip(rollouts, submissions):
            names, evidence = flags_record(detect(submission))
            rollout.flags += [name for name in names if name not in rollout.flags]
            rollout.flag_evidence.update(evidence)
            if self.hack_policy == "zero" and evidence:
                rollout.reward = 0.0
