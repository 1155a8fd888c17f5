"""Policies the agent tests share: the default local policy and a real-architecture checkpoint
(Qwen2 config, Qwen2.5's own chat template, random weights), both built here with no download."""

from __future__ import annotations

from pathlib import Path

import torch
import trl
from transformers import Qwen2Config, Qwen2ForCausalLM

from training.agents.chat import CHATML_SPECIAL_TOKENS
from training.agents.policy import build_agent_policy, chat_tokenizer
from training.policy import train_tokenizer

CORPUS = [
    "<|im_start|>system\nYou are a coding agent.<|im_end|>\n<|im_start|>user\nFix add.<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n'
    "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsolution.py\n</tool_response>"
    "<|im_end|>\n",
    'def add(a, b):\n    """Return a + b."""\n    return a + b\n',
] * 4

# Qwen2.5's chat template as TRL ships it (trl/chat_templates/qwen2_5.jinja): a real template.
QWEN2_5_TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def default_policy(**overrides):
    """A tiny default local policy (CPU)."""
    options = {"vocab_size": 400, "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 1024}
    return build_agent_policy(CORPUS, device=torch.device("cpu"), **{**options, **overrides})


def qwen2_checkpoint(directory: Path, *, pad_is_eos: bool = False) -> Path:
    """A Qwen2 checkpoint directory: config, random weights (embeddings padded past the
    vocabulary, as Qwen2's are), a tokenizer with Qwen2.5's chat template; ``<|im_end|>`` is its
    eos, and its pad too when ``pad_is_eos``."""
    tokenizer = chat_tokenizer(
        train_tokenizer(CORPUS, vocab_size=400, special_tokens=CHATML_SPECIAL_TOKENS)
    )
    tokenizer.chat_template = QWEN2_5_TEMPLATE
    if pad_is_eos:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer) + 16,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
