"""Monitors that score trajectories for suspected reward hacking (being built: issue 6)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlmMonitorConfig:
    """Where the LLM monitor sends trajectories."""

    @classmethod
    def from_config(cls, data: dict) -> "LlmMonitorConfig":
        from training.config import ConfigError

        raise ConfigError("config key 'llm_monitor': the LLM monitor is not available yet")
