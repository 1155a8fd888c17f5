"""Bad run configs are refused before launch, naming the key."""

import pytest

from training.config import ConfigError, RunConfig, config_from_command_line


@pytest.mark.parametrize(
    "data, key",
    [
        ({"learning_rate": 1e-4}, "learning_rate"),
        ({"group_size": 1}, "group_size"),
        ({"steps": 0}, "steps"),
        ({"top_p": 1.5}, "top_p"),
        ({"lr": "fast"}, "lr"),
        ({"model_path": "/nonexistent/model"}, "model_path"),
        ({"loss_aggregation": "sum"}, "loss_aggregation"),
        ({"n_embd": 130, "n_head": 4}, "n_embd"),
        ({"sharding": "zero3"}, "sharding"),
        ({"mixed_precision": "fp8", "sharding": "fsdp2"}, "mixed_precision"),
        ({"mixed_precision": "bf16"}, "mixed_precision"),  # bf16 compute is FSDP2's
        ({"activation_checkpointing": "yes"}, "activation_checkpointing"),
    ],
)
def test_refused_with_the_key_named(data, key):
    with pytest.raises(ConfigError, match=key):
        RunConfig.from_dict(data)


def test_good_config_round_trips():
    config = RunConfig.from_dict({"lr": 1, "steps": 3})
    assert config.lr == 1.0 and config.steps == 3
    assert RunConfig.from_dict(config.to_dict()) == config


def test_command_line_config_layers_and_refuses_steps_in_set():
    config = config_from_command_line(
        defaults={"lr": 0.5, "group_size": 4}, overrides=["group_size=6"], steps=3
    )
    assert (config.lr, config.group_size, config.steps) == (0.5, 6, 3)
    with pytest.raises(ConfigError, match="--steps"):
        config_from_command_line(defaults={}, overrides=["steps=5"], steps=3)
