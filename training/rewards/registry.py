"""Reward functions registered by name, as in TRL: plain callables ``f(submission) -> float``.

A run's config picks components and weights (``reward_weights``: ``{"correctness": 1.0,
"quality": 0.2}``); the trajectory keeps every component and the weighted mean as its
reward. Each component returns a value in [0, 1]; higher is better.

**Gated on correctness.** A component registered with ``gated=True`` (quality, efficiency,
security) measures *how* a program works, which means nothing for a program that does not:
:func:`reward_components` multiplies it by correctness
(``training.rewards.base.correctness_of``: the share of hidden tests passed; on a repository
task the share of FAIL_TO_PASS ids, 0 when a PASS_TO_PASS id broke). The bare prompt, code
that does not parse or a short clean wrong answer earns nothing from them; half the tests
passed, half of its quality. So a trajectory's total reward is 0 when it fails every test,
whatever the weights, and never rises above what its correctness allows (``total <=
correctness`` when correctness is weighted at all). The raw measure is the function itself
(``training.rewards.quality.quality(submission)``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from training.errors import ConfigError
from training.rewards.base import GradedSubmission, correctness_of

RewardFunction = Callable[[GradedSubmission], float]
REGISTRY: dict[str, RewardFunction] = {}


def reward(name: str, *, gated: bool = False) -> Callable[[RewardFunction], RewardFunction]:
    """Register ``f`` as the reward component ``name`` (a decorator); ``gated``: the component
    only counts as far as the program is correct (see the module's docstring).

    Raises:
        ValueError: ``name`` is taken.
    """

    def register(function: RewardFunction) -> RewardFunction:
        if name in REGISTRY and REGISTRY[name] is not function:
            raise ValueError(f"reward component {name!r} is registered twice")
        function.gated_on_correctness = gated
        REGISTRY[name] = function
        return function

    return register


def _gate(function: RewardFunction, value: float, submission: GradedSubmission) -> float:
    """``value`` clamped to [0, 1], times correctness when ``function`` is gated."""
    value = min(1.0, max(0.0, float(value)))
    if getattr(function, "gated_on_correctness", False):
        value *= min(1.0, max(0.0, float(correctness_of(submission))))
    return value


def _load_builtin() -> None:
    # The built-in components register themselves on import.
    importlib.import_module("training.rewards.components")


def check_weights(weights: dict) -> None:
    """Raises ConfigError naming an unknown component or a weight that is not a number >= 0,
    or weights that are all 0."""
    _load_builtin()
    if not weights:
        raise ConfigError(
            "config key 'reward_weights' is empty; give at least {\"correctness\": 1.0}"
        )
    for name, weight in weights.items():
        if name not in REGISTRY:
            raise ConfigError(
                f"config key 'reward_weights': unknown reward component {name!r}; "
                f"known: {', '.join(sorted(REGISTRY))}"
            )
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(
                f"config key 'reward_weights': {name!r} must weigh a number >= 0, got {weight!r}"
            )
    if not any(weights.values()):
        raise ConfigError(
            "config key 'reward_weights': every weight is 0; at least one must be > 0"
        )


def reward_components(submission: GradedSubmission, names) -> dict[str, float]:
    """Every named component of ``submission``, each clamped to [0, 1], the gated ones times
    correctness."""
    _load_builtin()
    return {name: _gate(REGISTRY[name], REGISTRY[name](submission), submission) for name in names}


def reward_components_batch(submissions: list[GradedSubmission], names) -> list[dict[str, float]]:
    """:func:`reward_components` for many submissions at once: a component with a ``batch``
    callable computes the whole batch in one go (quality: one ruff run); values clamped to
    [0, 1], the gated ones times correctness."""
    _load_builtin()
    names = list(names)
    columns = {}
    for name in names:
        function = REGISTRY[name]
        batch = getattr(function, "batch", None)
        columns[name] = (
            batch(submissions) if batch is not None else [function(s) for s in submissions]
        )
    return [
        {name: _gate(REGISTRY[name], columns[name][i], s) for name in names}
        for i, s in enumerate(submissions)
    ]


def weighted_total(components: dict[str, float], weights: dict[str, float]) -> float:
    """The weighted mean of ``components`` under ``weights`` (components without weight count 0)."""
    total_weight = sum(weights.values())
    return (
        sum(components.get(name, 0.0) * weight for name, weight in weights.items()) / total_weight
    )
