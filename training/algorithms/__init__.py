"""RL and SFT objectives, one module each, readable top to bottom."""
