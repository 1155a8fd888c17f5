"""The trainer loop: SFT warm start, then GRPO-family steps over multi-turn rollouts.

It reads top to bottom, as cleanrl's single files do:

1. **Setup** (:func:`_setup`): the run's task versions, the policy (built or loaded), the
   SFT warm start, the frozen KL reference, the training pool, the optimizer and
   learning-rate schedule, the task sampler's state, the scorer and the held-out set, all
   held by one :class:`Trainer`.
2. **Resume** (:func:`_resume_policy`, :func:`_resume_state`): a relaunched run continues
   from its newest checkpoint. Records of steps after it (a step whose record landed but
   whose checkpoint did not) are rewound first, so the resumed run writes exactly the steps
   that remain, none twice; a resume with no step left is an error. A run of 6 steps killed
   with SIGKILL after step 3 and resumed ends with the same parameters and records as an
   uninterrupted one (tests/training/test_resume_after_sigkill.py).
3. **The loop** (:func:`_train`): for each step left, stop if the run was cancelled, then
   the step's phases.
4. **Each step's phases** (:func:`_step` and after it): sample tasks (dropped tasks of
   earlier steps are replayed first) -> roll out a group per task on this rank's share
   (the one rollout loop of training/rollout.py: in the run's mode, the policy writes code
   or calls tools, observes, revises, up to K turns) and grade in a fresh sandbox on the
   hidden tests -> shape
   rewards, advantages, clipped update (training/update.py) -> record the step and
   broadcast it -> drift detectors -> held-out evaluation (when due) -> checkpoint (when
   due).

Every rank runs the same code; rank 0 alone writes the database and the checkpoint's shared
files (training/distributed.py). The order of the calls that draw random numbers (policy
build, SFT, rollouts, update) is part of the behaviour: a resumed run draws what the
uninterrupted one would.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from django.db import transaction
from tokenizers import Tokenizer

from core.broker import BROKER_ERRORS, BrokerLost, broker_retry
from core.dbwait import DB_ERRORS, DatabaseLost, db_retry
from core.logcontext import log_context_bind, log_context_process
from core.metrics import trainer_step_observe
from sandboxes.queue import live_workers
from tasks_library.difficulty import DifficultySampler, pass_rate
from tasks_library.models import TaskVersion
from tasks_library.selectors import runtimes_of, task_set_versions, trainable
from tasks_library.services import task_version_record_attempts
from tasks_library.task_spec import task_spec_of
from training import artifacts, checkpoint, distributed, flags, services, sharding
from training.checkpoint import (
    checkpoint_step,
    latest_checkpoint,
    read_model_state,
    read_rank_state,
    rng_restore,
    rng_states,
)
from training.config import RunConfig
from training.drift import DriftConfig
from training.fresh_tests import grading_seed, with_fresh_tests
from training.heldout import heldout_evaluate
from training.models import StepMetric, TrainingRun
from training.modes import mode_of
from training.paths import run_dir
from training.phase import PhaseTracker
from training.policy import Policy
from training.rollout import (
    Rollout,
    RolloutConfig,
    RolloutStats,
    TaskSpec,
    collect_rollouts,
    sandbox_demand,
)
from training.run_warnings import prompts_over_limit, tasks_dropped_warning
from training.scoring import Scorer
from training.services import drift_step
from training.update import grpo_update

__all__ = ["grpo_update", "train_run", "run_dir", "ResumeError"]

log = logging.getLogger(__name__)


class ResumeError(RuntimeError):
    """A resume that cannot train anything (no step left) or cannot read its checkpoint."""


@dataclass
class TrainerState:
    """What the loop carries from step to step besides the model and optimizer (checkpointed).

    ``buckets`` are the task versions' difficulty buckets as they were at the run's start,
    so a resumed run samples exactly as the uninterrupted one would; ``replay`` holds the
    task version ids whose groups were dropped for infrastructure errors, replayed first.
    """

    sampler: DifficultySampler
    buckets: dict[int, str]
    replay: list[int] = field(default_factory=list)

    @classmethod
    def fresh(
        cls, specs: list[TaskSpec], *, buckets: dict[int, str], weights: dict, seed: int
    ) -> TrainerState:
        """The state at a run's start: a sampler over ``specs`` (seeded with ``seed``) that reads
        each task's bucket from the state's own ``buckets`` (which a resume replaces)."""
        state = cls(
            sampler=DifficultySampler(
                specs, lambda spec: state.buckets[spec.task_version_id], weights, seed
            ),
            buckets=buckets,
        )
        return state

    def to_dict(self) -> dict:
        return {
            "sampler_rng": self.sampler.rng.getstate(),
            "groups_skipped": self.sampler.groups_skipped,
            "groups_kept": self.sampler.groups_kept,
            "buckets": self.buckets,
            "replay": list(self.replay),
        }

    def restore(self, data: dict) -> None:
        self.sampler.rng.setstate(data["sampler_rng"])
        self.sampler.groups_skipped, self.sampler.groups_kept = (
            data["groups_skipped"],
            data["groups_kept"],
        )
        self.buckets.clear()
        self.buckets.update(data["buckets"])
        self.replay = list(data["replay"])

    def next_tasks(self, specs: list[TaskSpec], count: int) -> list[TaskSpec]:
        """Replayed tasks first (each once), then a fresh draw for the remaining slots."""
        by_id = {spec.task_version_id: spec for spec in specs}
        chosen = [by_id[vid] for vid in dict.fromkeys(self.replay) if vid in by_id][:count]
        self.replay = [vid for vid in self.replay if vid not in {c.task_version_id for c in chosen}]
        if len(chosen) < count:
            taken = {c.task_version_id for c in chosen}
            fresh = [s for s in self.sampler.sample(count) if s.task_version_id not in taken]
            chosen += fresh[: count - len(chosen)]
        return chosen

    def after_step(self, rollouts: list) -> None:
        """Count informative groups (dynamic sampling) and queue dropped groups for replay."""
        by_group: dict[int, list] = {}
        for rollout in rollouts:
            by_group.setdefault(rollout.group, []).append(rollout)
        for members in by_group.values():
            scored = [m for m in members if not m.dropped]
            if scored:
                self.sampler.keep_group([m.reward for m in scored])
            if len(scored) < len(members) and members[0].task.task_version_id not in self.replay:
                self.replay.append(members[0].task.task_version_id)


@dataclass
class Trainer:
    """Everything a step needs, built once by :func:`_setup` (and restored from a checkpoint).

    ``model`` is the module the update differentiates (training/sharding.py): ``policy.model``,
    under DistributedDataParallel when there are several ranks, or with ``sharding: "fsdp2"`` on
    several ranks a sharded copy whose full weights are gathered into ``policy.model`` (the one
    rollouts sample from) after every update. ``sharding`` holds the run's sharding settings.
    ``generator`` is this rank's sampling generator (seeded ``seed + 7919 * rank``).
    ``reference`` is the frozen post-SFT policy of the KL penalty (None when ``kl_coef`` is 0).
    ``specs`` is the training pool, ``heldout`` the held-out set's tasks (empty: no evaluation).
    Steps ``start_step + 1 .. config.steps`` remain to be trained.
    """

    run: TrainingRun
    config: RunConfig
    ranks: distributed.Ranks
    tracker: PhaseTracker
    directory: Path
    policy: Policy
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    reference: torch.nn.Module | None
    generator: torch.Generator
    state: TrainerState
    specs: list[TaskSpec]
    rollout_config: RolloutConfig
    scorer: Scorer
    heldout: list[TaskSpec]
    drift_config: DriftConfig
    start_step: int
    sharding: sharding.Sharding = field(default_factory=sharding.Sharding)


# --- the entry point and the loop -----------------------------------------------------------------


def train_run(run_id: int) -> None:
    """Train run ``run_id`` to the end (or resume it) and record its outcome on the run.

    The run must be ``launching``; it becomes ``running``, then ``succeeded``,
    ``cancelled`` (seen between steps) or ``failed`` with the error as reason (``interrupted``
    when a checkpoint could not be written: a full disk, the last good checkpoint intact). Under
    torchrun only rank 0 moves the run; every rank trains.

    Redis going away is not the run's failure: sandbox batches, rollouts and the held-out
    evaluation wait for it and retry (core/broker.py), and a broker that stays away
    longer than ``CRUCIBLE_BROKER_WAIT_S`` ends the run ``interrupted`` (resumable from its last
    checkpoint by the reconcile loop), with the reason.

    Raises:
        ResumeError: the newest checkpoint already holds every step (nothing to train).
        BrokerLost: Redis stayed away longer than the broker wait, after the run was marked
            ``interrupted``.
        Exception: whatever failed the run, after it was recorded.
    """
    log_context_process(run_id=run_id)  # every record of this process is about this run
    ranks = distributed.setup()
    try:
        run = TrainingRun.objects.select_related("task_set").get(pk=run_id)
        config = RunConfig.from_dict(run.config)
        if ranks.is_main:
            services.run_transition(
                run_id=run_id,
                to_status=TrainingRun.RUNNING,
                reason=f"trainer started ({ranks.world} rank(s) on {ranks.device.type})",
            )
        # Every rank announces its phase and sandbox demand (the autoscaler sizes the pool by
        # it); rank 0 also samples the pool for the run page. Withdrawn however the run ends.
        tracker = PhaseTracker(run_id=run_id, rank=ranks.rank, sample=ranks.is_main)
        try:
            _train(run, config, ranks, tracker)
        except (
            BrokerLost,
            *BROKER_ERRORS,
            DatabaseLost,
            *DB_ERRORS,
            checkpoint.CheckpointWriteError,
        ) as exc:
            # Infrastructure, not the run's fault: interrupted, resumable from the last good
            # checkpoint (the reconcile loop resumes it, up to max_resumes).
            log.exception("run %s interrupted", run_id)
            if ranks.is_main:
                _interrupted(run_id, exc)
            raise
        except Exception as exc:
            log.exception("run %s failed", run_id)
            if ranks.is_main:
                services.run_transition(
                    run_id=run_id,
                    to_status=TrainingRun.FAILED,
                    reason=f"{type(exc).__name__}: {exc}",
                )
            raise
        finally:
            tracker.close()
    finally:
        distributed.teardown()


def _interrupted(run_id: int, exc: BaseException) -> None:
    """Record that infrastructure (the broker, the database, the disk) stopped the run."""
    if isinstance(exc, checkpoint.CheckpointWriteError):
        what = "checkpoint write failed"
    elif isinstance(exc, (DatabaseLost, *DB_ERRORS)):
        what = "lost the database; resumable from the last checkpoint"
    else:
        what = "lost the broker (Redis); resumable from the last checkpoint"
    try:
        services.run_transition(
            run_id=run_id,
            to_status=TrainingRun.INTERRUPTED,
            reason=f"{what}: {type(exc).__name__}: {exc}",
        )
    except DB_ERRORS:
        # The database itself is away: the reconcile loop finds the trainer gone and interrupts
        # the run with the backend's reason.
        log.exception("run %s: could not record the interruption", run_id)


def _train(
    run: TrainingRun, config: RunConfig, ranks: distributed.Ranks, tracker: PhaseTracker
) -> None:
    """Setup (and resume), the steps that remain, then the final checkpoint.

    A cancelled run stops between two steps and returns (its status is the canceller's).
    """
    trainer = _setup(run, config, ranks, tracker)
    for step in range(trainer.start_step + 1, config.steps + 1):
        log_context_bind(step=step)
        if _cancelled(trainer):
            return
        _step(trainer, step)
        if ranks.is_main:
            db_retry(
                lambda step=step: drift_step(run.pk, step, trainer.drift_config),
                what=f"run {run.pk}'s drift detectors",
            )
        if trainer.heldout and ranks.is_main and _due(step, config.eval_every, config.steps):
            _evaluate_heldout(trainer, step)
        if _due(step, config.checkpoint_every, config.steps):
            _checkpoint(trainer, step)
        tracker.set("idle")
    _finish(trainer)


def _due(step: int, every: int, last: int) -> bool:
    """Whether a periodic action (held-out evaluation, checkpoint) runs after ``step``: every
    ``every`` steps and after the ``last`` one."""
    return step % every == 0 or step == last


# --- setup ----------------------------------------------------------------------------------------


def _setup(
    run: TrainingRun, config: RunConfig, ranks: distributed.Ranks, tracker: PhaseTracker
) -> Trainer:
    """Build the :class:`Trainer` of a run, from its start or from its newest checkpoint.

    In this order (the random draws of a resumed run follow an uninterrupted one's): the
    task versions (failing if a runtime has no sandbox worker), the run's directory, the
    checkpoint to resume from (rank 0 finds it, every rank gets it), the seeds, the policy,
    then the SFT warm start (fresh run) or the checkpoint's weights (resume), the KL
    reference, the training pool, the optimizer and schedule, the sampler's state, then
    the checkpoint's optimizer, schedule, RNG and sampler states (resume). A sharded checkpoint
    (FSDP2) is read after the model is sharded: DCP puts each slice where this run's layout
    wants it, on any number of ranks.

    Raises:
        RuntimeError: a runtime of the run's tasks has no live sandbox worker.
        ArtifactStoreError: the run's artefact store cannot be written or read.
        ResumeError, CheckpointError: see :func:`_resume_policy`, :func:`_resume_state` and
            :func:`_reference_model`.
        ValueError: no task prompt fits ``max_prompt_tokens`` (training pool or held-out set);
            task kinds the run's ``rollout_mode`` does not train (repository tasks under
            ``completion``).
    """
    versions = _run_versions(run)
    refused = mode_of(config).refused(versions)
    if refused:
        raise ValueError(
            f"config key 'rollout_mode': {config.rollout_mode} rollouts cannot train on "
            f"{len(refused)} task(s) of the run's task set ({refused[0].task.task_id}...): "
            f"repository tasks train as agents; set it to 'agent'"
        )
    tracker.start(runtimes_of(versions))
    directory = _run_directory(run.pk, ranks)
    # Rank 0 finds (and, from object storage, downloads) the checkpoint; the others read its copy.
    resume_from = distributed.broadcast_value(
        latest_checkpoint(directory) if ranks.is_main else None
    )
    seed_everything(config.seed)
    generator = torch.Generator(device=ranks.device).manual_seed(config.seed + 7919 * ranks.rank)
    policy = mode_of(config).build_policy(config, versions, ranks.device)
    settings = sharding.Sharding.from_config(config, ranks.device)
    if resume_from is None:
        start_step = 0
        _warm_start(run.pk, policy, versions, config=config, ranks=ranks, tracker=tracker)
    else:
        start_step = _resume_policy(policy, resume_from, steps=config.steps, settings=settings)
    reference = _reference(policy, directory, config, ranks, resumed=resume_from is not None)
    specs = _training_pool(policy, versions, config)
    model = sharding.prepare(policy, ranks, settings)
    optimizer, scheduler = _optimizer(model, config)
    state = TrainerState.fresh(
        specs,
        buckets={v.pk: pass_rate(v).bucket for v in versions},
        weights=config.difficulty_weights,
        seed=config.seed,
    )
    if resume_from is not None:
        if checkpoint.is_sharded(resume_from):
            checkpoint.read_sharded(resume_from, model=model, optimizer=optimizer)
            sharding.gather_weights(model, policy.model)
        _resume_state(
            resume_from,
            rank=ranks.rank,
            optimizer=optimizer,
            scheduler=scheduler,
            generator=generator,
            state=state,
            reseed=config.seed + 7919 * ranks.rank + 104_729 * start_step,
        )
        if ranks.is_main:
            _resume_records(run.pk, start_step)
    elif ranks.is_main:
        services.run_summary_update(run_id=run.pk, rl_tasks=len(specs))
        _warn_dropped_tasks(run.pk, policy, versions, config, kept=len(specs))
    # The memory report's peak is the training's: loading and the warm start are behind.
    sharding.reset_peak_memory(ranks.device)
    return Trainer(
        run=run,
        config=config,
        ranks=ranks,
        tracker=tracker,
        directory=directory,
        policy=policy,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        reference=reference,
        generator=generator,
        state=state,
        specs=specs,
        rollout_config=RolloutConfig.from_run_config(config),
        scorer=_scorer(config, versions),
        heldout=_heldout_specs(run, policy, config),
        drift_config=DriftConfig.from_config(config.drift),
        start_step=start_step,
        sharding=settings,
    )


def _warn_dropped_tasks(
    run_id: int, policy: Policy, versions: list[TaskVersion], config: RunConfig, *, kept: int
) -> None:
    """Rank 0, a fresh run: the run's ``tasks_dropped`` warning when prompts longer than
    ``max_prompt_tokens`` were left out of the pool (:mod:`training.run_warnings`)."""
    dropped = prompts_over_limit(versions, policy.encode, config.max_prompt_tokens)
    warning = tasks_dropped_warning(dropped, limit=config.max_prompt_tokens, kept=kept)
    if warning:
        services.run_warning_raise(run_id=run_id, **warning)


def _run_versions(run: TrainingRun) -> list[TaskVersion]:
    """The run's task versions (ordered by task id), once every runtime they need has a worker.

    Raises:
        RuntimeError: a runtime has no live sandbox worker (the message says how to start one).
    """
    versions = list(
        run.task_versions.select_related("task", "test_suite", "environment").order_by(
            "task__task_id"
        )
    )
    for runtime in runtimes_of(versions):
        if not live_workers(runtime):
            # Without workers every rollout would come back infra_error: fail now, saying why.
            raise RuntimeError(
                f"no {runtime} sandbox worker is running; start one with "
                f"`python manage.py sandbox_worker --runtime {runtime}`"
            )
    return versions


def _run_directory(run_id: int, ranks: distributed.Ranks) -> Path:
    """The run's directory (checkpoints, the KL reference), created; rank 0 checks the artefact
    store now, so a misconfigured store fails the run before the first checkpoint.

    Raises:
        ArtifactStoreError: the store cannot be written (rank 0; the message says why).
    """
    directory = run_dir(run_id)
    directory.mkdir(parents=True, exist_ok=True)
    if ranks.is_main:
        store = artifacts.default_store()
        store.check(store.key_of(directory))
    return directory


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (each rank's sampling generator is seeded apart)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _warm_start(
    run_id: int,
    policy: Policy,
    versions: list[TaskVersion],
    *,
    config: RunConfig,
    ranks: distributed.Ranks,
    tracker: PhaseTracker,
) -> None:
    """The ``sft`` phase of a fresh run (the mode's warm start: :mod:`training.modes`); rank 0
    records its summary."""
    tracker.set("sft")

    def on_epoch(epoch: int, epochs: int, loss: float) -> None:
        if ranks.is_main:  # the run page and `train --headless` show it
            services.run_progress_record(
                run_id=run_id, phase="sft", done=epoch, total=epochs, detail=f"loss {loss:.3f}"
            )

    sft = mode_of(config).warm_start(policy, config, versions, on_epoch=on_epoch)
    tracker.set("idle")
    if ranks.is_main:  # its last epoch's progress stays: watchers show it until the first step
        services.run_summary_update(
            run_id=run_id, **sft, device=str(policy.device), ranks=ranks.world
        )


def _reference(
    policy: Policy, directory: Path, config: RunConfig, ranks: distributed.Ranks, *, resumed: bool
) -> torch.nn.Module | None:
    """The frozen KL reference (:func:`_reference_model`), or None when ``kl_coef`` is 0.

    Rank 0 writes it at the run's first start (not ``resumed``); then every rank reads the
    written copy, so all ranks, and every resume, penalise against the same weights.
    """
    if not config.kl_coef > 0:
        return None
    if ranks.is_main and not resumed:
        _reference_model(policy, directory, write=True)
    distributed.barrier()
    return _reference_model(policy, directory, write=False)


def _reference_model(policy: Policy, directory: Path, *, write: bool) -> torch.nn.Module:
    """The frozen reference for the KL penalty: the policy as it was after SFT.

    Written once to ``reference-model.pt`` (temporary file, then rename) so a resumed
    run penalises against the same model; read back from there on resume.

    Raises:
        ResumeError: reading, and the file is in neither the run's directory nor the store.
    """
    reference = copy.deepcopy(policy.model)
    path = directory / "reference-model.pt"
    store = artifacts.default_store()
    if write:
        temporary = path.with_suffix(".tmp")
        torch.save(reference.state_dict(), temporary)
        os.replace(temporary, path)
        store.put_file(store.key_of(path))
    else:
        try:
            # A resume on a fresh disk reads it back from the store.
            store.fetch_file(store.key_of(path))
        except artifacts.ArtifactNotFound:
            raise ResumeError(
                f"{store.location(store.key_of(path))} is missing: the KL reference of this run "
                f"cannot be restored"
            ) from None
        reference.load_state_dict(torch.load(path, map_location=policy.device, weights_only=True))
    reference.eval()
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    return reference


def _task_specs(
    policy: Policy, versions: list[TaskVersion], config: RunConfig, *, cap: int | None = None
) -> list[TaskSpec]:
    """A task pool: prompts that fit the context, shortest first, capped at ``cap`` (default
    ``train_tasks``)."""
    sized = []
    for v in versions:
        length = len(policy.encode(v.prompt))
        if length <= config.max_prompt_tokens:
            sized.append((length, v))
    sized.sort(key=lambda pair: (pair[0], pair[1].task.task_id))
    return [task_spec_of(v) for _length, v in sized[: config.train_tasks if cap is None else cap]]


def _training_pool(
    policy: Policy, versions: list[TaskVersion], config: RunConfig
) -> list[TaskSpec]:
    """The RL stage's task pool (:func:`_task_specs`, at most ``train_tasks``).

    Raises:
        ValueError: no task prompt fits ``max_prompt_tokens``.
    """
    specs = _task_specs(policy, versions, config)
    if not specs:
        raise ValueError(
            f"no task prompt fits max_prompt_tokens={config.max_prompt_tokens}; raise it"
        )
    return specs


def _optimizer(
    model: torch.nn.Module, config: RunConfig
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``model``'s trainable parameters (learning rate ``lr``, no weight decay) and
    its schedule: linear warm-up over ``lr_warmup_steps`` steps, then a constant rate."""
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=0.0
    )
    warmup = config.lr_warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0
    )
    return optimizer, scheduler


def _scorer(config: RunConfig, versions: list[TaskVersion]) -> Scorer:
    """The run's reward components, their weights and the hack policy; efficiency needs the
    references' profiles, measured once per task version in the sandbox and kept."""
    references = {}
    if "efficiency" in config.reward_weights:
        # Only runs that weigh efficiency measure reference profiles (sandbox runs).
        from training.rewards.reference import reference_profiles_ensure  # noqa: PLC0415

        references = reference_profiles_ensure(versions)
    return Scorer(
        weights=config.reward_weights, hack_policy=config.hack_policy, references=references
    )


def _heldout_specs(run: TrainingRun, policy: Policy, config: RunConfig) -> list[TaskSpec]:
    """The held-out set's trainable versions as they are at the run's (re)start.

    Raises:
        ValueError: no prompt of the held-out set fits ``max_prompt_tokens``.
    """
    if not (config.eval_every and run.eval_task_set_id):
        return []
    versions = list(
        trainable(task_set_versions(task_set=run.eval_task_set)).select_related(
            "task", "test_suite"
        )
    )
    specs = _task_specs(policy, versions, config, cap=len(versions))
    if not specs:
        raise ValueError(
            f"no prompt of the held-out set {run.eval_task_set.name!r} fits max_prompt_tokens="
            f"{config.max_prompt_tokens}"
        )
    return specs


# --- resume ---------------------------------------------------------------------------------------


def _resume_policy(
    policy: Policy, resume_from: Path, *, steps: int, settings: sharding.Sharding
) -> int:
    """Load checkpoint ``resume_from``'s weights and tokenizer into ``policy`` (the weights of a
    sharded checkpoint are read later, into the sharded model: :func:`_setup`).

    Returns:
        The step the checkpoint was written after (training goes on from the next one).

    Raises:
        ResumeError: the checkpoint already holds step ``steps`` (a resume would train 0
            steps), or its weights do not fit the model (unexpected or missing trainable keys).
        CheckpointError: the checkpoint holds no ``model.pt``, or is a DDP checkpoint and the
            run shards with FSDP2 (its optimizer state is not keyed for shards).
    """
    start_step = checkpoint_step(resume_from)
    if start_step >= steps:
        raise ResumeError(
            f"checkpoint {resume_from} already holds step {start_step} of {steps}: "
            f"a resume would train 0 steps"
        )
    policy.tokenizer = Tokenizer.from_file(str(resume_from / "tokenizer.json"))
    if checkpoint.is_sharded(resume_from):
        return start_step
    if settings.fsdp:
        raise checkpoint.CheckpointError(
            f"{resume_from} was written with sharding 'ddp' (model.pt and whole optimizer states); "
            "resume it with config key 'sharding' set to 'ddp'"
        )
    # Under LoRA the checkpoint holds only the adapters: the frozen base comes from model_path.
    missing, unexpected = policy.model.load_state_dict(
        read_model_state(resume_from), strict=not policy.is_lora
    )
    if unexpected or any(
        p.requires_grad for name, p in policy.model.named_parameters() if name in set(missing)
    ):
        raise ResumeError(
            f"{resume_from} does not fit this run's model (unexpected {unexpected[:3]}, "
            f"missing trainable {[m for m in missing][:3]})"
        )
    # The tokenizer the checkpoint was trained with is the truth (a rebuilt one must not drift):
    # read above.
    return start_step


def _resume_state(
    resume_from: Path,
    *,
    rank: int,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    generator: torch.Generator,
    state: TrainerState,
    reseed: int,
) -> None:
    """Put back rank ``rank``'s part of checkpoint ``resume_from``: the optimizer (unless it is in
    the DCP shards), the schedule, the RNG states (Python, numpy, torch and the sampling
    ``generator``) and the sampler's state (:meth:`TrainerState.restore`). A rank the sharded
    checkpoint's writer did not have takes rank 0's states and seeds its generator with
    ``reseed`` (its draws cannot be the old run's: that run had no such rank).

    Raises:
        CheckpointError: a DDP checkpoint holds no file of this rank (other world size).
    """
    saved = read_rank_state(resume_from, rank)
    if saved["optimizer"] is not None:
        optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    rng_restore(saved["rng"], generator)
    if not saved["own"]:
        generator.manual_seed(reseed)
    state.restore(saved["trainer"])


def _resume_records(run_id: int, start_step: int) -> None:
    """Rank 0: delete the records of steps after ``start_step`` (their checkpoint never landed)
    and note the resume in the run's summary."""
    rewound = services.run_rewind(run_id=run_id, to_step=start_step)
    services.run_summary_update(run_id=run_id, resumed_from_step=start_step, rewound_steps=rewound)


# --- each step's phases ---------------------------------------------------------------------------


def _cancelled(trainer: Trainer) -> bool:
    """Whether the run was cancelled: rank 0 reads the database, every rank gets its answer."""
    run, ranks = trainer.run, trainer.ranks
    cancelled = ranks.is_main and db_retry(
        lambda: TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.CANCELLED).exists(),
        what=f"run {run.pk}'s cancel check",
    )
    return distributed.broadcast_value(cancelled)


def _step(trainer: Trainer, step: int) -> None:
    """One RL step on every rank: sample tasks, roll out and grade this rank's share of the
    groups, update; rank 0 records the step (with its phases and sandbox pool timeline)."""
    config, state = trainer.config, trainer.state
    tasks = state.next_tasks(trainer.specs, min(config.tasks_per_step, len(trainer.specs)))
    if config.fresh_tests:
        tasks = _fresh_tests(trainer, tasks, step)
    local, times = _roll_out(trainer, tasks)
    update_metrics, update_s = _update(trainer, local)
    phase_metrics, timeline = trainer.tracker.take_step()
    rollouts = distributed.gather_lists(local)  # every rank's, in rank (and so group) order
    state.after_step(rollouts)
    memory = sharding.memory_report(  # every rank's bytes, gathered
        trainer.model,
        trainer.optimizer,
        trainer.ranks.device,
        sharding=trainer.sharding,
        rollout=trainer.policy.model,
    )
    if not trainer.ranks.is_main:
        return
    metrics = _step_metrics(
        rollouts, state, update=update_metrics, times=times, update_s=update_s, phases=phase_metrics
    )
    _record(trainer, step, rollouts, metrics=metrics, timeline=timeline)
    db_retry(
        lambda: services.run_summary_update(run_id=trainer.run.pk, memory=memory),
        what=f"run {trainer.run.pk}'s memory report",
    )


def _fresh_tests(trainer: Trainer, tasks: list[TaskSpec], step: int) -> list[TaskSpec]:
    """This rank's share of ``tasks`` with the step's fresh test inputs in their hidden tests
    (:func:`training.fresh_tests.with_fresh_tests`, seeded by the run's seed, ``step`` and
    each task version); the other ranks' tasks unchanged (each rank draws its own share's)."""
    mine = trainer.ranks.shard(len(tasks))
    share = tasks[mine.start : mine.stop]
    seeds = [
        grading_seed(run_seed=trainer.config.seed, step=step, task_version_id=t.task_version_id)
        for t in share
    ]
    fresh = broker_retry(
        lambda: with_fresh_tests(share, count=trainer.config.fresh_tests, seeds=seeds),
        what=f"run {trainer.run.pk}'s fresh test inputs",
    )
    return [*tasks[: mine.start], *fresh, *tasks[mine.stop :]]


def _roll_out(trainer: Trainer, tasks: list[TaskSpec]) -> tuple[list[Rollout], RolloutStats]:
    """Roll out and grade this rank's contiguous share of ``tasks`` (one group of ``group_size``
    trajectories per task; group numbers are global), announcing the ``rollout`` and
    ``grading`` phases (:func:`training.rollout.collect_rollouts`)."""
    mine = trainer.ranks.shard(len(tasks))
    # Redis lost mid-rollout: wait for it, then roll the share out again from the same random
    # states, so the step draws what it would have drawn without the outage.
    states = rng_states(trainer.generator)
    share = tasks[mine.start : mine.stop]

    def roll_out() -> tuple[list[Rollout], RolloutStats]:
        return collect_rollouts(
            trainer.policy,
            share,
            trainer.rollout_config,
            generator=trainer.generator,
            first_group=mine.start,
            scorer=trainer.scorer,
            on_phase=trainer.tracker.set,
        )

    return broker_retry(
        roll_out,
        what=f"run {trainer.run.pk}'s rollouts",
        before_retry=lambda: rng_restore(states, trainer.generator),
    )


def _update(trainer: Trainer, rollouts: list[Rollout]) -> tuple[dict, float]:
    """The ``update`` phase: shape rewards, advantages, the clipped update on this rank's
    rollouts (:func:`training.update.grpo_update`; gradients all-reduced across ranks), then,
    under FSDP2, the full weights gathered from the shards into the rollouts' model
    (:func:`training.sharding.gather_weights`).

    Returns:
        ``(metrics, seconds)``: the update's metrics (``loss/*``, ``policy/*``, ...,
        ``timing/weight_gather_s``: seconds of the gather, 0 when rollouts and update share the
        weights) and the update's wall-clock time (the gather not included).
    """
    trainer.tracker.set("update")  # no sandbox demand: the pool may fall back to its floor
    started = time.monotonic()
    metrics = grpo_update(
        trainer.policy,
        trainer.optimizer,
        rollouts,
        trainer.config,
        model=trainer.model,
        reference=trainer.reference,
        scheduler=trainer.scheduler,
    )
    update_s = time.monotonic() - started
    started = time.monotonic()
    sharding.gather_weights(trainer.model, trainer.policy.model)
    metrics["timing/weight_gather_s"] = time.monotonic() - started
    trainer.tracker.set("idle")
    return metrics, update_s


def _step_metrics(
    rollouts: list[Rollout],
    state: TrainerState,
    *,
    update: dict,
    times: RolloutStats,
    update_s: float,
    phases: dict,
) -> dict:
    """The step's metrics: the update's, then the batch's (``reward/*``, ``rollouts/*``,
    ``flags/rate``, ``sampler/*``, ``timing/*`` in seconds, ``tokens/generated``), then the
    seconds per phase (``timing/phase_<name>_s``). Rates are shares of the scored
    (not dropped) trajectories."""
    scored = [r for r in rollouts if not r.dropped]
    metrics = {
        **update,
        "reward/pass_rate": sum(r.passed for r in scored) / max(1, len(scored)),
        "rollouts/dropped": len(rollouts) - len(scored),
        "rollouts/timeout": sum(flags.ROLLOUT_TIMEOUT in r.flags for r in rollouts),
        # share of scored trajectories with at least one reward-hacking flag
        "flags/rate": sum(bool(r.flag_evidence) for r in scored) / max(1, len(scored)),
        "rollouts/replay_queue": len(state.replay),
        "sampler/groups_skipped": state.sampler.groups_skipped,
        "rollouts/turns_mean": sum(len(r.turns) for r in rollouts) / len(rollouts),
        "timing/update_s": update_s,
    }
    for name in sorted({k for r in scored for k in r.reward_components}):
        metrics[f"reward/{name}"] = sum(r.reward_components.get(name, 0.0) for r in scored) / max(
            1, len(scored)
        )
    # rank 0's own split of its time (timing/*, tokens/generated; ranks run their shares at the
    # same time) and, for tool-call turns, agent/*: turns, calls per tool, end reasons
    metrics.update(times.metrics(rollouts))
    metrics.update(phases)  # timing/phase_<name>_s
    return metrics


def _record(
    trainer: Trainer, step: int, rollouts: list[Rollout], *, metrics: dict, timeline: dict
) -> None:
    """Rank 0: count the tasks' attempts, persist the step (trajectories, metrics, pool
    timeline) and broadcast it, export it to Prometheus, run the rule monitors, and queue the
    LLM monitor when the run has one."""
    run_id = trainer.run.pk
    # A database lost meanwhile (a PostgreSQL restart): each write waits for it and runs again.
    # Each is one transaction (rolled back whole by the drop), and the step's record looks first
    # whether its commit landed before the drop: no attempt counted twice, no step recorded twice.
    db_retry(lambda: _record_attempts(rollouts), what=f"run {run_id}'s attempt counts")

    def record_once() -> StepMetric:
        landed = StepMetric.objects.filter(run_id=run_id, step=step).first()
        return landed or services.step_record(
            run_id=run_id, step=step, rollouts=rollouts, metrics=metrics, timeline=timeline
        )

    record = db_retry(record_once, what=f"run {run_id}'s step {step} record")
    trainer_step_observe(run_id=run_id, step=step, metrics=record.metrics)  # core/metrics
    db_retry(  # rules: milliseconds
        lambda: services.run_monitors_step(run_id=run_id, step=step, include_llm=False),
        what=f"run {run_id}'s rule monitors",
    )
    if trainer.config.llm_monitor:
        # The Celery task module (and its app) loads only for runs that have an LLM monitor.
        from training.tasks import run_llm_monitor_task  # noqa: PLC0415

        # seconds per trajectory: a Celery worker's job; the step is recorded, so a lost broker
        # delays this message, never the record
        broker_retry(
            lambda: run_llm_monitor_task.delay(run_id, step), what=f"run {run_id}'s LLM monitor"
        )


def _record_attempts(rollouts: list[Rollout]) -> None:
    """Feed each task version's hidden-test results into its pass-rate counts (dropped and
    timed-out trajectories were never graded, so they do not count), in one transaction."""
    by_version: dict[int, list] = {}
    for rollout in rollouts:
        if not rollout.dropped and flags.ROLLOUT_TIMEOUT not in rollout.flags:
            by_version.setdefault(rollout.task.task_version_id, []).append(rollout)
    with transaction.atomic():
        for version_id, members in by_version.items():
            task_version_record_attempts(
                version_id=version_id, passed=sum(m.passed for m in members), total=len(members)
            )


def _evaluate_heldout(trainer: Trainer, step: int) -> None:
    """Rank 0, the ``eval`` phase: ``eval_samples`` trajectories per held-out task with their
    own RNG (:func:`training.heldout.heldout_evaluate`), recorded, then the drift detectors
    again (the held-out onset signal reads the evaluation)."""
    config, run = trainer.config, trainer.run
    trainer.tracker.set("eval", sandbox_demand(trainer.heldout, each=config.eval_samples))
    result = broker_retry(  # its own seeded generator: a retry draws the same samples
        lambda: heldout_evaluate(
            trainer.policy,
            trainer.heldout,
            samples=config.eval_samples,
            rollout_config=trainer.rollout_config,
            seed=config.seed * 1_000_003 + step,
            scorer=trainer.scorer,
        ),
        what=f"run {run.pk}'s held-out evaluation",
    )
    db_retry(
        lambda: services.evaluation_record(
            run_id=run.pk,
            step=step,
            task_set_id=run.eval_task_set_id,
            samples_per_task=config.eval_samples,
            result=result,
        ),
        what=f"run {run.pk}'s held-out evaluation record",
    )
    db_retry(
        lambda: drift_step(run.pk, step, trainer.drift_config),
        what=f"run {run.pk}'s drift detectors",
    )


def _checkpoint(trainer: Trainer, step: int) -> None:
    """The ``checkpoint`` phase: write the checkpoint of ``step`` from every rank (rank 0 the
    model and tokenizer, each rank its optimizer, schedule, RNG and sampler states), then
    publish it atomically (rank 0) and keep the newest ``keep_checkpoints``."""
    trainer.tracker.set("checkpoint")
    with checkpoint.writing(trainer.directory, step):  # a full disk: CheckpointWriteError
        _checkpoint_write(trainer, step)


def _checkpoint_write(trainer: Trainer, step: int) -> None:
    ranks, policy = trainer.ranks, trainer.policy
    staging = checkpoint.staging_dir(trainer.directory, step)
    shards = trainer.sharding.fsdp  # model and optimizer through DCP, a shard per rank
    if ranks.is_main:
        checkpoint.prepare_staging(trainer.directory, step)
        if shards:
            checkpoint.write_readable(staging, model=policy.model, tokenizer=policy.tokenizer)
        else:
            checkpoint.write_model(
                staging,
                model=policy.model,
                tokenizer=policy.tokenizer,
                trainable_only=policy.is_lora,
            )
    distributed.barrier()
    if shards:
        checkpoint.write_sharded(staging, model=trainer.model, optimizer=trainer.optimizer)
    checkpoint.write_rank_state(
        staging,
        rank=ranks.rank,
        step=step,
        optimizer=None if shards else trainer.optimizer,
        scheduler=trainer.scheduler,
        generator=trainer.generator,
        trainer_state=trainer.state.to_dict(),
    )
    distributed.barrier()
    if ranks.is_main:
        checkpoint.publish(staging, step=step, keep=trainer.config.keep_checkpoints)
    distributed.barrier()


def _finish(trainer: Trainer) -> None:
    """After the last step: rank 0 saves ``checkpoint-final`` (the policy as a loadable model
    directory) through the artefact store and marks the run ``succeeded``; then every rank
    leaves together.

    Raises:
        ArtifactStoreError: the store refused the final checkpoint (rank 0).
    """
    run, config = trainer.run, trainer.config
    # Under FSDP2 the float32 master weights are gathered from the shards (every rank takes part):
    # the rollouts' copy may be bfloat16.
    master = sharding.full_state_dict(trainer.model) if sharding.sharded(trainer.model) else None
    if trainer.ranks.is_main:
        final = trainer.directory / "checkpoint-final"
        trainer.policy.save(final, state_dict=master)
        store = artifacts.default_store()
        services.run_summary_update(
            run_id=run.pk, checkpoint=store.put_dir(final, store.key_of(final))
        )
        services.run_transition(
            run_id=run.pk,
            to_status=TrainingRun.SUCCEEDED,
            reason=f"trained steps {trainer.start_step + 1}..{config.steps}",
        )
    # Every rank leaves together, before the process group goes (a DDP wrapper freed after
    # its group was destroyed can hang the rank that still holds it).
    distributed.barrier()
