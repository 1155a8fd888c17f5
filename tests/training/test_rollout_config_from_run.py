"""A run's rollout settings are read from its RunConfig, none copied by hand: each RolloutConfig
field takes the key of its own name (or the key its metadata names), and the defaults agree."""

from dataclasses import fields

from training.config import ROLLOUT_MODES, RunConfig
from training.modes import MODES
from training.rollout import ROLLOUT_ENVIRONMENTS, RUN_KEY, RolloutConfig


def test_every_rollout_setting_is_read_from_the_run_config():
    run = RunConfig.from_dict(
        {
            "group_size": 3,
            "max_turns": 4,
            "max_new_tokens": 40,
            "temperature": 0.7,
            "top_p": 0.9,
            "rollout_timeout_s": 12.5,
        }
    )
    assert RolloutConfig.from_run_config(run) == RolloutConfig(
        group_size=3, max_turns=4, max_new_tokens=40, temperature=0.7, top_p=0.9, timeout_s=12.5
    )


def test_a_default_run_rolls_out_with_the_default_settings():
    assert RolloutConfig.from_run_config(RunConfig()) == RolloutConfig()


def test_each_rollout_field_names_a_run_key_or_none():
    run_keys = {f.name for f in fields(RunConfig)}
    for f in fields(RolloutConfig):
        key = f.metadata.get(RUN_KEY, f.name)
        assert key is None or key in run_keys, f"RolloutConfig.{f.name} reads no RunConfig key"


def test_every_rollout_mode_has_a_policy_and_an_environment():
    """The modes a config accepts (config, a leaf every process reads), the modes the trainer
    builds a policy for (training.modes) and those the rollout loop has an environment for
    (training.rollout) are one list: the config cannot import the other two."""
    assert set(ROLLOUT_MODES) == set(MODES) == set(ROLLOUT_ENVIRONMENTS)
