"""Drift and onset detectors over a run's reward streams (being built: issue 6)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DriftConfig:
    """Thresholds of the drift and onset detectors."""

    @classmethod
    def from_config(cls, data: dict) -> "DriftConfig":
        from training.config import ConfigError

        if data:
            raise ConfigError(f"config key 'drift': unknown key(s) {', '.join(sorted(data))}")
        return cls()
