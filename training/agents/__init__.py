"""Tool-using agents: chat templates, tool-call parsing, tools, environments, rollouts."""
