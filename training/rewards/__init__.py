"""Reward components: registered callables over a graded submission (see registry.py)."""
