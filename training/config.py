"""A training run's configuration, checked before anything is launched."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from core.bounds import TURN_MAX
from training.errors import ConfigError

# The choices of two keys; their meaning is in training/algorithms/ (aggregate.py and the
# estimators).
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
ADVANTAGE_ESTIMATORS = ("grpo", "rloo")
HACK_POLICIES = ("flag", "zero")
# The modes training.modes.MODES builds (a test keeps the lists one).
ROLLOUT_MODES = ("completion", "agent")
# The choices of 'sharding' and 'mixed_precision' (training/sharding.py, which imports torch).
SHARDINGS = ("ddp", "fsdp2")
PRECISIONS = ("auto", "bf16", "fp32")


# The largest value of each numeric key: what a real run needs and no more (a group_size of
# 10**20 would be refused by nothing else before the trainer allocated for it). Every int and
# float key has one (tests/security/test_numeric_bounds.py checks).
MAXIMA: dict[str, float] = {
    "steps": 1_000_000,
    "seed": 2**32 - 1,
    "sft_epochs": 10_000,
    "sft_lr": 10.0,
    "sft_batch_size": 65_536,
    "flawed_demonstrations": 100,
    "fresh_tests": 1000,
    "lr": 10.0,
    "tasks_per_step": 65_536,
    "group_size": 1024,
    "max_turns": TURN_MAX,
    "max_new_tokens": 1_048_576,
    "max_tokens": 16_777_216,  # an agent trajectory: prompt, turns and observations
    "max_prompt_tokens": 1_048_576,
    "train_tasks": 10_000_000,
    "temperature": 100.0,
    "top_p": 1.0,
    "clip_low": 1.0,
    "clip_high": 1.0,
    "ppo_epochs": 100,
    "kl_coef": 1000.0,
    "overlong_cache_tokens": 1_048_576,
    "lr_warmup_steps": 1_000_000,
    "grad_clip": 1e6,
    "sandbox_parallelism": 4096,
    "rollout_timeout_s": 86_400.0,
    "checkpoint_every": 1_000_000,
    "keep_checkpoints": 1000,
    "nproc_per_node": 64,
    "max_resumes": 1000,
    "eval_every": 1_000_000,
    "eval_samples": 1024,
    "n_embd": 65_536,
    "n_layer": 1024,
    "n_head": 1024,
}


# Keys that name a file or directory on the trainer's host, and the setting naming the one
# directory each may point into. A path outside is refused by its spelling alone, before the
# filesystem is touched, so the answer never tells an operator whether some host file exists.
HOST_PATH_ROOTS = {
    "sft_data": ("SFT_DATA_DIR", "CRUCIBLE_SFT_DATA_DIR"),
    "model_path": ("MODEL_DIR", "CRUCIBLE_MODEL_DIR"),
}


def under_root(value: str, *, key: str) -> Path:
    """``value`` (relative to its key's directory, or absolute inside it) as an absolute path
    inside that directory (:data:`HOST_PATH_ROOTS`), links resolved.

    Raises:
        ConfigError: the path is outside the directory (said without looking at the path's
            target: the same answer whether it exists or not).
    """
    from django.conf import settings  # noqa: PLC0415 (configs are built after Django is set up)

    setting, variable = HOST_PATH_ROOTS[key]
    root = Path(getattr(settings, setting)).resolve()
    spelled = Path(os.path.normpath(root / value))
    if root in spelled.parents and root in spelled.resolve().parents:
        return spelled.resolve()
    raise ConfigError(
        f"config key '{key}': {value!r} is not inside {root} ({variable}); put it there and "
        "give its name relative to that directory"
    )


def parse_overrides(pairs: list[str]) -> dict:
    """``["lr=1e-4", "max_turns=3"]`` -> ``{"lr": 0.0001, "max_turns": 3}`` (values read as JSON,
    else text).

    Raises:
        ConfigError: a pair is not ``KEY=VALUE``.
    """
    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: write KEY=VALUE, for example --set lr=1e-4")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def config_from_command_line(*, defaults: dict, overrides: list[str], steps: int) -> RunConfig:
    """The config of a command's run: ``defaults``, then ``--set`` pairs, then ``--steps``.

    Raises:
        ConfigError: a malformed pair, ``steps`` given through ``--set``, or a bad value.
    """
    extra = parse_overrides(overrides)
    if "steps" in extra:
        raise ConfigError("set the number of steps with --steps, not --set steps=...")
    return RunConfig.from_dict({**defaults, **extra, "steps": steps})


@dataclass
class RunConfig:
    """Every knob of a run. Units: tokens for lengths, seconds for times.

    ``train_tasks`` caps how many of the task set's valid versions (shortest prompts
    first) the RL stage samples from; SFT always uses every valid version's reference.
    """

    steps: int = 20
    seed: int = 0
    model_path: str = ""  # empty: build the small default policy locally
    sft_epochs: int = 40
    sft_lr: float = 3e-3
    sft_batch_size: int = 16
    # SFT demonstrations: a {"task_id", "completion"} JSONL file; empty: the reference solutions.
    sft_data: str = ""
    # Agent runs: flawed demonstrations per task beside the reference's (0: none): the reference
    # with one mutation that the visible tests catch (tasks_library.validation.mutants), written
    # and submitted as the reference would be (training/agents/demonstrations.py). A warm start
    # that imitates a mixed demonstrator leaves RL a choice to learn in every group (the agent
    # scenario's reward rises from it).
    flawed_demonstrations: int = 0
    # Fresh test inputs per grading (training/fresh_tests.py): each step, up to this many new
    # inputs per python-check task (its hidden tests' literal calls mutated, the reference as the
    # oracle) join the hidden tests its group is graded on; seeded by (seed, step, task version)
    # and recorded on each trajectory. 0: the fixed tests only.
    fresh_tests: int = 0
    lr: float = 2e-4
    tasks_per_step: int = 4
    group_size: int = 8
    # Rollouts: "completion" (the policy writes the function, re-prompted with its visible-test
    # result up to max_turns times) or "agent" (multi-turn tool use in a sandbox session through
    # the policy's chat template: training/agents/; max_turns turns of at most max_new_tokens).
    rollout_mode: str = "completion"
    max_turns: int = 2
    max_new_tokens: int = 96
    # Agent trajectories' token budget (prompt, turns, observations); 0: the model's context.
    max_tokens: int = 0
    max_prompt_tokens: int = 320
    train_tasks: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    # Advantages: "grpo" (group mean, / std when normalize_std) or "rloo" (leave-one-out mean).
    advantage_estimator: str = "grpo"
    normalize_std: bool = True
    # PPO clip range [1 - clip_low, 1 + clip_high]; clip_high > clip_low is DAPO's clip-higher.
    clip_low: float = 0.2
    clip_high: float = 0.2
    ppo_epochs: int = 1
    loss_aggregation: str = "seq-mean-token-mean"
    # KL penalty (k3 estimator) against the frozen initial policy after SFT; 0 keeps no reference
    # model.
    kl_coef: float = 0.0
    # DAPO soft overlong shaping over the last ``overlong_cache_tokens`` of the sampled-token budget
    # (max_turns * max_new_tokens); 0 turns it off.
    overlong_cache_tokens: int = 0
    lr_warmup_steps: int = 0
    grad_clip: float = 1.0
    sandbox_parallelism: int = 2
    # Wall-clock budget of one rollout (all its turns), seconds: past it the rollout ends
    # ``timeout``.
    rollout_timeout_s: float = 300.0
    # Checkpoints: written every ``checkpoint_every`` steps (and at the last), the newest
    # ``keep_checkpoints`` kept. A relaunched run resumes from the newest one.
    checkpoint_every: int = 1
    keep_checkpoints: int = 2
    # Data-parallel ranks of the local backend (torchrun --nproc-per-node); groups are sharded
    # across them.
    nproc_per_node: int = 1
    # How ranks hold the model (training/sharding.py): "ddp" (a whole float32 copy per rank,
    # gradients all-reduced) or "fsdp2" (weights, gradients and optimizer state sharded across
    # ranks block by block; checkpoints written by torch.distributed.checkpoint, one shard per
    # rank, resumable on another number of ranks).
    sharding: str = "ddp"
    # FSDP2's compute dtype: "auto" (bfloat16 where the device supports it), "bf16" or "fp32";
    # master weights, gradient reduction and optimizer state stay float32. DDP computes in fp32.
    mixed_precision: str = "auto"
    # Recompute each transformer block's activations in backward instead of keeping them.
    activation_checkpointing: bool = False
    # Relaunch an interrupted run from its last checkpoint (reconcile loop), at most
    # ``max_resumes`` times.
    resume_on_interrupt: bool = True
    max_resumes: int = 2
    # Launch spec of the kubernetes backend (training.kubernetes.KubernetesSpec); empty for local
    # runs.
    kubernetes: dict = field(default_factory=dict)
    # Reward components (training/rewards registry) and their weights; the reward is their
    # weighted mean, each component in [0, 1].
    reward_weights: dict = field(default_factory=lambda: {"correctness": 1.0})
    # What a reward-hacking flag does: "flag" keeps the reward (the flag is for review and
    # alerts), "zero" sets the trajectory's reward to 0.
    hack_policy: str = "flag"
    # Held-out evaluation: a task set never trained on, evaluated every ``eval_every`` steps
    # (0: never) with ``eval_samples`` samples per task.
    eval_task_set: str = ""
    eval_every: int = 0
    eval_samples: int = 4
    # Drift and onset alert thresholds (training.drift.DriftConfig); empty: documented defaults.
    drift: dict = field(default_factory=dict)
    # An LLM monitor on an OpenAI-compatible endpoint (training.monitors.LlmMonitorConfig); empty:
    # rules only.
    llm_monitor: dict = field(default_factory=dict)
    # LoRA adapters through peft for a model loaded from model_path: {"r": 8, "alpha": 16, ...};
    # empty: full fine-tuning.
    lora: dict = field(default_factory=dict)
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    # Task sampling by difficulty bucket (tasks_library.difficulty): {"hard": 1, "medium": 2, ...};
    # empty samples uniformly.
    difficulty_weights: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def _check_plugins(self) -> None:
        """The keys whose meaning lives in a plug-in module: each module checks its own, raising
        :class:`~training.errors.ConfigError` naming the key.

        The plug-ins (river and scipy, the kubernetes client among them) load when a config is
        checked, not when this module is imported. None of them imports this module (they take
        ConfigError from the leaf :mod:`training.errors`), so the checks run one way only.
        """
        from training.drift import DriftConfig  # noqa: PLC0415 (a plug-in, loaded when checked)
        from training.kubernetes import KubernetesSpec  # noqa: PLC0415 (a plug-in, as above)
        from training.monitors import LlmMonitorConfig  # noqa: PLC0415 (a plug-in, as above)
        from training.rewards.registry import check_weights  # noqa: PLC0415 (a plug-in, as above)

        check_weights(self.reward_weights)
        DriftConfig.from_config(self.drift)
        if self.llm_monitor:
            LlmMonitorConfig.from_config(self.llm_monitor)
        if self.kubernetes:
            KubernetesSpec.from_config(self.kubernetes)

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        """Build and check a config.

        Raises:
            ConfigError: an unknown key, a value of the wrong type, an impossible
                value, or a ``model_path`` that does not exist.
        """
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown config key(s) {', '.join(unknown)}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        values = {}
        for key, value in data.items():
            expected = type(getattr(cls(), key))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ConfigError(f"config key {key!r} must be {expected.__name__}, got {value!r}")
            values[key] = value
        config = cls(**values)
        config.check()
        return config

    def check(self) -> None:
        """Raises ConfigError naming the first impossible value."""
        positive = (
            "steps",
            "tasks_per_step",
            "group_size",
            "max_turns",
            "max_new_tokens",
            "max_prompt_tokens",
            "train_tasks",
            "sandbox_parallelism",
            "ppo_epochs",
            "sft_batch_size",
            "n_embd",
            "n_layer",
            "n_head",
            "checkpoint_every",
            "keep_checkpoints",
            "nproc_per_node",
            "eval_samples",
        )
        non_negative = (
            "sft_epochs",
            "flawed_demonstrations",
            "fresh_tests",
            "kl_coef",
            "overlong_cache_tokens",
            "lr_warmup_steps",
            "max_resumes",
            "max_tokens",
            "eval_every",
        )
        if self.seed < 0:
            raise ConfigError(f"config key 'seed' must be 0 or more, got {self.seed}")
        for key, top in MAXIMA.items():
            if not getattr(self, key) <= top:  # NaN fails too
                raise ConfigError(
                    f"config key {key!r} must be at most {top:g}, got {getattr(self, key)}"
                )
        for key in positive:
            if getattr(self, key) < 1:
                raise ConfigError(
                    f"config key {key!r} must be at least 1, got {getattr(self, key)}"
                )
        for key in non_negative:
            if getattr(self, key) < 0:
                raise ConfigError(f"config key {key!r} must be 0 or more, got {getattr(self, key)}")
        if self.group_size < 2:
            raise ConfigError(
                "config key 'group_size' must be at least 2: "
                "GRPO compares trajectories within a group"
            )
        for key in ("lr", "sft_lr", "temperature", "rollout_timeout_s", "grad_clip"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"config key {key!r} must be > 0, got {getattr(self, key)}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"config key 'top_p' must be in (0, 1], got {self.top_p}")
        for key in ("clip_low", "clip_high"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"config key {key!r} must be in (0, 1), got {getattr(self, key)}")
        choices = {
            "loss_aggregation": AGGREGATIONS,
            "advantage_estimator": ADVANTAGE_ESTIMATORS,
            "hack_policy": HACK_POLICIES,
            "rollout_mode": ROLLOUT_MODES,
            "sharding": SHARDINGS,
            "mixed_precision": PRECISIONS,
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ConfigError(
                    f"config key {key!r} must be one of {', '.join(allowed)}, "
                    f"got {getattr(self, key)!r}"
                )
        if self.rollout_mode == "agent" and self.lora:
            # The agent policy loads a checkpoint with its own template and no LoRA wrapper yet:
            # refused rather than silently ignored.
            raise ConfigError(
                "config key 'lora' is not available with rollout_mode 'agent' yet; leave it at {} "
                "(full fine-tuning of model_path)"
            )
        if self.sharding != "fsdp2" and self.mixed_precision == "bf16":
            raise ConfigError(
                "config key 'mixed_precision': 'bf16' needs sharding 'fsdp2' (DDP computes in "
                "float32); leave it at 'auto' or set sharding to 'fsdp2'"
            )
        if self.sharding == "fsdp2" and self.lora:
            raise ConfigError(
                "config key 'sharding': 'fsdp2' shards a full fine-tuning; with 'lora' only the "
                "adapters train, which DDP holds cheaply: set sharding to 'ddp'"
            )
        if self.overlong_cache_tokens > self.max_turns * self.max_new_tokens:
            raise ConfigError(
                f"config key 'overlong_cache_tokens' ({self.overlong_cache_tokens}) "
                f"must not exceed the sampled-token budget max_turns * max_new_tokens "
                f"({self.max_turns * self.max_new_tokens})"
            )
        # The task library's buckets come with Django's ORM: loaded when a config is checked.
        from tasks_library.difficulty import BUCKET_NAMES  # noqa: PLC0415 (see above)

        for name, weight in self.difficulty_weights.items():
            if (
                name not in BUCKET_NAMES
                or isinstance(weight, bool)
                or not isinstance(weight, (int, float))
                or weight < 0
            ):
                raise ConfigError(
                    f"config key 'difficulty_weights': {name!r}: {weight!r} must be a bucket of "
                    f"{', '.join(BUCKET_NAMES)} with a weight >= 0"
                )
        if self.n_embd % self.n_head:
            raise ConfigError(
                f"config key 'n_embd' ({self.n_embd}) must be divisible by 'n_head' ({self.n_head})"
            )
        if self.model_path:
            self.model_path = str(under_root(self.model_path, key="model_path"))
            if not any(
                (Path(self.model_path) / name).exists()
                for name in ("config.json", "adapter_config.json")
            ):
                raise ConfigError(
                    f"config key 'model_path': {self.model_path!r} holds no config.json "
                    f"(a model) or adapter_config.json (a saved LoRA adapter)"
                )
        if self.sft_data:
            self.sft_data = str(under_root(self.sft_data, key="sft_data"))
            if not Path(self.sft_data).is_file():
                raise ConfigError(f"config key 'sft_data': {self.sft_data!r} is not a file")
        if self.flawed_demonstrations and self.rollout_mode != "agent":
            raise ConfigError(
                "config key 'flawed_demonstrations' is for rollout_mode 'agent' (its scripted "
                "demonstrations); leave it at 0"
            )
        if self.sft_data and self.flawed_demonstrations:
            raise ConfigError(
                "config key 'flawed_demonstrations' mutates the task versions' references; "
                "with 'sft_data' the demonstrations come from that file: set one of them"
            )
        if self.lora and not self.model_path:
            raise ConfigError(
                "config key 'lora' needs 'model_path': "
                "LoRA adapts a loaded model, not the small default one"
            )
        if self.eval_every and not self.eval_task_set:
            raise ConfigError(
                "config key 'eval_every' needs 'eval_task_set': "
                "the held-out task set to evaluate on"
            )
        self._check_plugins()
