"""What a launch can refuse before anything is created: a run that could train nothing.

``training.services.run_create`` (the console's launch form and ``POST /api/runs/`` alike) calls
:func:`launch_check` on the task versions the run would pin:

* repository tasks train as agents: ``rollout_mode`` must be ``agent``;
* a prompt longer than ``max_prompt_tokens`` is left out of the RL pool (the trainer warns:
  ``training.run_warnings``); when *every* prompt is certainly longer, the run would fail at its
  first step after its whole warm start, so the launch is refused with the number to raise the
  key to.

"Certainly longer" is counted without building the policy (its default tokenizer is trained on
the tasks when the run starts, in the trainer): with ``model_path``, exactly, in the checkpoint's
own ``tokenizer.json``; with the default policy, by a lower bound that holds for every byte-level
BPE tokenizer that splits text as GPT-2 does (the default policy's): BPE never merges across the
pre-tokenizer's pieces, so a text has at least as many tokens as pieces, and a special token
written in the text (``<|im_end|>``) counts as one. A launch is never refused for a run that
would have trained.
"""

from __future__ import annotations

import re
from pathlib import Path

from training.config import ConfigError, RunConfig

SPECIAL = re.compile(r"<\|[^<>|\s]{1,40}\|>")
"""A special token as the policies write them (``<|bos|>``, ``<|im_start|>``)."""


def tokens_at_least(text: str) -> int:
    """A lower bound on ``text``'s tokens in any GPT-2-style byte-level BPE tokenizer (the
    default policies'): the pieces of its pre-tokenizer, a special token one piece."""
    from tokenizers import pre_tokenizers  # noqa: PLC0415 (loaded only to check a launch)

    split = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    count, start = 0, 0
    for match in SPECIAL.finditer(text):
        count += len(split.pre_tokenize_str(text[start : match.start()])) + 1
        start = match.end()
    return count + len(split.pre_tokenize_str(text[start:]))


def prompt_token_counter(config: RunConfig):
    """``(count(text) -> int, exact)``: the exact count in ``model_path``'s tokenizer when the run
    loads one, else :func:`tokens_at_least` (``exact`` False)."""
    tokenizer_file = Path(config.model_path) / "tokenizer.json" if config.model_path else None
    if tokenizer_file is not None and tokenizer_file.is_file():
        from tokenizers import Tokenizer  # noqa: PLC0415 (as above)

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        return (lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)), True
    return tokens_at_least, False


def launch_check(*, versions: list, config: RunConfig) -> None:
    """Refuse a run that cannot train, before it is created (``versions``: the task versions it
    would pin, with ``task`` loaded).

    Raises:
        ConfigError: (``rollout_mode``) repository tasks without ``rollout_mode=agent``;
            (``max_prompt_tokens``) every task's prompt is longer than ``max_prompt_tokens``,
            naming the shortest and the value that keeps it.
    """
    repository = [v for v in versions if v.is_repository]
    if repository and config.rollout_mode != "agent":
        raise ConfigError(
            f"config key 'rollout_mode': the task set holds {len(repository)} repository "
            f"task(s) ({repository[0].task.task_id}...): they train as agents; set rollout_mode "
            "to agent",
            field="rollout_mode",
        )
    if not versions:
        return
    count, exact = prompt_token_counter(config)
    shortest = min(((count(v.prompt), v) for v in versions), key=lambda pair: pair[0])
    tokens, version = shortest
    if tokens > config.max_prompt_tokens:
        fix = (
            f"has {tokens} tokens in the model's tokenizer: raise max_prompt_tokens to {tokens}"
            if exact
            else f"has at least {tokens} tokens (the default policy's tokenizer is trained when "
            f"the run starts: give it room above {tokens})"
        )
        raise ConfigError(
            f"config key 'max_prompt_tokens': every task's prompt is longer than "
            f"{config.max_prompt_tokens} tokens, so the run would train on nothing; the shortest, "
            f"{version.task.task_id}, {fix}",
            field="max_prompt_tokens",
        )
