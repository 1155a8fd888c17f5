"""When a run trains less than it was asked to, and what it says about it.

A run that drops tasks, trains no token or learns from no group "succeeds" all the same; its
warnings say so on its page and in the runs table (``training.models.RunWarning``, written by
``training.services.run_warnings_record``). Three kinds:

* ``tasks_dropped`` (before the first step): task versions whose prompt is longer than
  ``max_prompt_tokens`` in the policy's tokenizer, left out of the RL pool (the trainer keeps
  the tasks that fit, shortest first: ``training.trainer._task_specs``).
* ``no_tokens_trained`` (per step): the update trained no token (``tokens/trained`` 0): every
  group's rewards were equal, or nothing was scored. The policy did not change at that step.
* ``zero_advantage`` (per step): at least :data:`ZERO_ADVANTAGE_SHARE` of the step's groups had
  all-equal rewards (``groups/zero_advantage`` of ``groups/total``): their advantage is 0 and
  GRPO learns nothing from them.

Each rule is a pure function of what the trainer already records; this module writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

TASKS_DROPPED = "tasks_dropped"
NO_TOKENS_TRAINED = "no_tokens_trained"
ZERO_ADVANTAGE = "zero_advantage"
KINDS = {
    TASKS_DROPPED: "tasks dropped: prompt too long",
    NO_TOKENS_TRAINED: "no token trained",
    ZERO_ADVANTAGE: "groups without advantage",
}
ZERO_ADVANTAGE_SHARE = 0.5
"""A step warns when at least this share of its groups carried no advantage."""
STEPS_KEPT = 50
"""Steps listed in a step warning's details (the newest; ``steps`` counts them all)."""


def prompts_over_limit(
    versions: Iterable, encode: Callable[[str], list[int]], limit: int
) -> list[dict]:
    """The task versions whose prompt, in tokens of ``encode``, is longer than ``limit``:
    ``[{"task_id", "version", "tokens"}]`` (``versions``: task versions with ``task`` loaded)."""
    over = []
    for version in versions:
        tokens = len(encode(version.prompt))
        if tokens > limit:
            over.append(
                {"task_id": version.task.task_id, "version": version.number, "tokens": tokens}
            )
    return over


def tasks_dropped_warning(dropped: list[dict], *, limit: int, kept: int) -> dict | None:
    """The ``tasks_dropped`` warning for ``dropped`` (:func:`prompts_over_limit`), or None when
    nothing was dropped: ``{"kind", "message", "details"}``."""
    if not dropped:
        return None
    longest = max(d["tokens"] for d in dropped)
    names = ", ".join(f"{d['task_id']} ({d['tokens']} tokens)" for d in dropped[:5])
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    return {
        "kind": TASKS_DROPPED,
        "message": (
            f"{len(dropped)} task(s) left out of training: their prompt is longer than "
            f"max_prompt_tokens={limit} (the longest {longest} tokens): {names}{more}. "
            f"The run trains on the {kept} that fit; raise max_prompt_tokens to keep them."
        ),
        "details": {"limit": limit, "kept": kept, "tasks": dropped},
    }


def step_warnings(step: int, metrics: dict) -> list[dict]:
    """The step warnings a recorded step's ``metrics`` call for: ``[{"kind", "step",
    "figures"}]`` (``figures``: the counts behind it). Steps whose metrics lack the counts (an
    update that did not report them) raise nothing."""
    out = []
    if metrics.get("tokens/trained") == 0:
        out.append({"kind": NO_TOKENS_TRAINED, "step": step, "figures": {"tokens": 0}})
    zero, total = metrics.get("groups/zero_advantage"), metrics.get("groups/total")
    if isinstance(zero, int) and isinstance(total, int) and total > 0:
        if zero / total >= ZERO_ADVANTAGE_SHARE:
            out.append(
                {"kind": ZERO_ADVANTAGE, "step": step, "figures": {"zero": zero, "groups": total}}
            )
    return out


def step_warning_message(kind: str, steps: dict[str, dict], count: int, last_step: int) -> str:
    """What a step warning says after ``count`` steps (``steps``: the newest ones' figures by
    step), the newest at ``last_step``."""
    if kind == NO_TOKENS_TRAINED:
        return (
            f"No token was trained at {count} step(s), the newest step {last_step}: every group's "
            "rewards were equal (or nothing was scored), so the policy did not change there. "
            "Look at the reward spread within groups: easier or harder tasks, a higher "
            "temperature, or a larger group_size."
        )
    latest = steps.get(str(last_step), {})
    return (
        f"At {count} step(s) at least {ZERO_ADVANTAGE_SHARE:.0%} of the groups carried no "
        f"advantage (all rewards equal within the group; step {last_step}: "
        f"{latest.get('zero', '?')} of {latest.get('groups', '?')} groups): GRPO learns nothing "
        "from them."
    )
