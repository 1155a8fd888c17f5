"""The error a run configuration is refused with: a leaf every checker of a part of the config
imports (the run config itself, and the owners of its sub-configs: drift thresholds, the LLM
monitor, reward weights, the Kubernetes spec), so that none of them imports another to say no.
"""

from __future__ import annotations

from core.errors import InputError


class ConfigError(InputError):
    """A run configuration that cannot be launched; the message names the key."""
