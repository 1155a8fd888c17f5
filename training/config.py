"""A training run's configuration, checked before anything is launched."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


class ConfigError(ValueError):
    """A run configuration that cannot be launched; the message names the key."""


def parse_overrides(pairs: list[str]) -> dict:
    """``["lr=1e-4", "max_turns=3"]`` -> ``{"lr": 0.0001, "max_turns": 3}`` (values read as JSON, else text).

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


def config_from_command_line(*, defaults: dict, overrides: list[str], steps: int) -> "RunConfig":
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
    lr: float = 2e-4
    tasks_per_step: int = 4
    group_size: int = 8
    max_turns: int = 2
    max_new_tokens: int = 96
    max_prompt_tokens: int = 320
    train_tasks: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    clip_eps: float = 0.2
    ppo_epochs: int = 1
    normalize_std: bool = True
    loss_aggregation: str = "seq-mean-token-mean"
    sandbox_parallelism: int = 2
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    # Task sampling by difficulty bucket (tasks_library.difficulty): {"hard": 1, "medium": 2, ...};
    # empty samples uniformly.
    difficulty_weights: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

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
            raise ConfigError(f"unknown config key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
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
        positive = ("steps", "tasks_per_step", "group_size", "max_turns", "max_new_tokens", "max_prompt_tokens",
                    "train_tasks", "sandbox_parallelism", "ppo_epochs", "sft_batch_size", "n_embd", "n_layer", "n_head")
        for key in positive:
            if getattr(self, key) < 1:
                raise ConfigError(f"config key {key!r} must be at least 1, got {getattr(self, key)}")
        if self.sft_epochs < 0:
            raise ConfigError(f"config key 'sft_epochs' must be 0 or more, got {self.sft_epochs}")
        if self.group_size < 2:
            raise ConfigError("config key 'group_size' must be at least 2: GRPO compares trajectories within a group")
        for key in ("lr", "sft_lr", "temperature"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"config key {key!r} must be > 0, got {getattr(self, key)}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"config key 'top_p' must be in (0, 1], got {self.top_p}")
        if not 0 < self.clip_eps < 1:
            raise ConfigError(f"config key 'clip_eps' must be in (0, 1), got {self.clip_eps}")
        if self.loss_aggregation not in ("token-mean", "seq-mean-token-mean"):
            raise ConfigError(
                f"config key 'loss_aggregation' must be token-mean or seq-mean-token-mean, got {self.loss_aggregation!r}"
            )
        from tasks_library.difficulty import BUCKET_NAMES

        for name, weight in self.difficulty_weights.items():
            if name not in BUCKET_NAMES or isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise ConfigError(f"config key 'difficulty_weights': {name!r}: {weight!r} must be a bucket of "
                                  f"{', '.join(BUCKET_NAMES)} with a weight >= 0")
        if self.n_embd % self.n_head:
            raise ConfigError(f"config key 'n_embd' ({self.n_embd}) must be divisible by 'n_head' ({self.n_head})")
        if self.model_path and not (Path(self.model_path) / "config.json").exists():
            raise ConfigError(f"config key 'model_path': {self.model_path!r} holds no config.json")
