"""Every scenario of ``up`` starts from a config the trainer accepts (RunConfig's own checks),
and the agent scenario's settings keep what its measurements rest on (console/scenarios.py)."""

import pytest

from console.management.commands.up import COMPLETION_CONFIG
from console.scenario_data import DATA_CONFIG
from console.scenario_terminal import TERMINAL_CONFIG, TERMINAL_TASKS
from console.scenarios import AGENT_CONFIG, AGENT_TASKS, HACKING_CONFIG
from training.config import ConfigError, config_from_command_line


@pytest.mark.parametrize(
    "defaults",
    [COMPLETION_CONFIG, HACKING_CONFIG, DATA_CONFIG, AGENT_CONFIG, TERMINAL_CONFIG],
    ids=["completion", "hacking", "data", "agent", "terminal"],
)
def test_each_scenario_config_is_a_valid_run_config(defaults):
    config = config_from_command_line(defaults=defaults, overrides=[], steps=20)
    assert {k: getattr(config, k) for k in defaults} == defaults


def test_the_agent_scenario_samples_every_task_at_every_step_from_a_mixed_warm_start():
    config = config_from_command_line(defaults=AGENT_CONFIG, overrides=[], steps=20)
    assert config.rollout_mode == "agent"
    assert config.tasks_per_step == config.train_tasks == AGENT_TASKS
    assert config.flawed_demonstrations >= 1 and config.temperature < 1.0


def test_the_terminal_scenario_fits_its_instructions_and_one_task_per_family():
    config = config_from_command_line(defaults=TERMINAL_CONFIG, overrides=[], steps=8)
    assert config.rollout_mode == "agent" and TERMINAL_TASKS == 4  # four families
    assert config.tasks_per_step == config.train_tasks == TERMINAL_TASKS
    assert config.max_prompt_tokens >= 512  # the shipped instructions' length, in tokens
    assert config.max_new_tokens + config.max_prompt_tokens < config.max_tokens


def test_a_bad_override_of_a_scenario_names_the_key():
    with pytest.raises(ConfigError, match="temperature"):
        config_from_command_line(defaults=AGENT_CONFIG, overrides=["temperature=-1"], steps=20)
