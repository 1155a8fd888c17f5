"""The agent policy: a causal LM and its chat template, built locally or loaded from a directory.

:func:`build_agent_policy` builds the default local policy with no download: a byte-level BPE
tokenizer trained on the task corpus with the ChatML markers as special tokens and the
Hermes tool-call markers as added tokens, the ChatML tool template of
:mod:`training.agents.chat`, and a small GPT-2 with random weights. :meth:`AgentPolicy.save`
writes a plain Hugging Face directory (the template in ``tokenizer_config.json``), and
:func:`load_agent_policy` reads it, or a real checkpoint (Qwen2.5-Coder, Qwen3, Llama...),
the same way: the same code path for the demo policy and a real one.

A loaded checkpoint gets no invented special token and no resized embedding: the agent
speaks the model's own template, tool-call format and end-of-turn token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from training.agents.chat import (
    CHATML_ADDED_TOKENS,
    CHATML_SPECIAL_TOKENS,
    CHATML_TOOLS_TEMPLATE,
    ENDOFTEXT,
    IM_END,
    ChatTemplate,
)
from training.policy import (
    context_length,
    pick_device,
    pick_dtype,
    small_gpt2,
    train_tokenizer,
)


@dataclass
class AgentPolicy:
    """A model and its :class:`ChatTemplate`.

    Duck-compatible with :class:`training.policy.Policy` where sampling and the loss need it
    (``model``, ``device``, ``pad_id``, ``n_positions``, ``trainable_parameters``).
    """

    model: torch.nn.Module
    chat: ChatTemplate
    device: torch.device

    @property
    def pad_id(self) -> int:
        return self.chat.pad_id

    @property
    def tokenizer(self) -> Tokenizer:
        """The ``tokenizers.Tokenizer`` under the chat template (checkpoints write it as
        ``tokenizer.json``)."""
        return self.chat.tokenizer.backend_tokenizer

    @tokenizer.setter
    def tokenizer(self, value: Tokenizer) -> None:
        """Put back a checkpoint's ``tokenizer.json``, keeping the chat template, its
        end-of-turn and pad tokens."""
        old = self.chat.tokenizer
        fast = PreTrainedTokenizerFast(
            tokenizer_object=value,
            eos_token=old.eos_token,
            pad_token=old.pad_token,
            chat_template=old.chat_template,
        )
        self.chat = ChatTemplate(fast, end_of_turn=self.chat.end_of_turn)

    @property
    def bos_id(self) -> int:
        """An id for a placeholder row (the update's empty batch): the pad id."""
        return self.chat.pad_id

    @property
    def end_id(self) -> int:
        """The end-of-turn id: sampling stops on it."""
        return self.chat.end_of_turn_id

    @property
    def n_positions(self) -> int:
        """The model's context length in tokens."""
        return context_length(self.model.config)

    @property
    def is_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def encode(self, text: str) -> list[int]:
        return self.chat.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.chat.decode(ids)

    def save(self, directory: Path, *, state_dict: dict | None = None) -> None:
        """Write a Hugging Face directory (config, weights, tokenizer with its chat template).

        ``state_dict``: the weights to write instead of the model's own (the float32 master
        weights gathered from FSDP2's shards, as :meth:`training.policy.Policy.save` takes them).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, state_dict=state_dict)
        self.chat.tokenizer.save_pretrained(directory)


def chat_tokenizer(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """``tokenizer`` (with the ChatML special tokens) as a ``transformers`` tokenizer carrying
    :data:`CHATML_TOOLS_TEMPLATE`, ``<|im_end|>`` as end of turn and ``<|endoftext|>`` as
    pad."""
    missing = [t for t in CHATML_SPECIAL_TOKENS if tokenizer.token_to_id(t) is None]
    if missing:
        raise ValueError(f"the tokenizer lacks the ChatML special tokens {missing}")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        chat_template=CHATML_TOOLS_TEMPLATE,
    )
    fast.add_tokens(CHATML_ADDED_TOKENS)
    return fast


def build_agent_policy(
    corpus: list[str],
    *,
    vocab_size: int = 2048,
    n_embd: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_positions: int = 2048,
    seed: int = 0,
    device: torch.device | None = None,
) -> AgentPolicy:
    """The default local policy: a tokenizer trained on ``corpus`` (texts the agent will read
    and write: rendered conversations, code), the ChatML tool template, a fresh GPT-2
    (float32, weights seeded by ``seed``).

    Args:
        n_positions: the context length in tokens (a trajectory's prompt, turns and
            observations together).
    """
    tokenizer = chat_tokenizer(
        train_tokenizer(corpus, vocab_size=vocab_size, special_tokens=CHATML_SPECIAL_TOKENS)
    )
    device = device or pick_device()
    token = tokenizer.convert_tokens_to_ids
    model = small_gpt2(
        len(tokenizer),
        (token(ENDOFTEXT), token(IM_END), token(ENDOFTEXT)),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        seed=seed,
    )
    return AgentPolicy(model=model.to(device), chat=ChatTemplate(tokenizer), device=device)


def load_agent_policy(
    directory: Path,
    *,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    end_of_turn: str = "",
) -> AgentPolicy:
    """Load a causal LM and its tokenizer (with its chat template) from a local directory.

    Nothing is downloaded, no token is added, no embedding is resized. Dropout is off (the
    trainer recomputes the sampled ids' log-probs).

    Args:
        end_of_turn: the token that ends an assistant turn; default the tokenizer's
            ``eos_token`` (Qwen2.5 instruct: ``<|im_end|>``).

    Raises:
        FileNotFoundError: no ``config.json`` in ``directory``.
        ChatTemplateMissing: the tokenizer has no usable chat template (the message says what
            to add).
        ValueError: the tokenizer's ids do not fit the model's embeddings, or the model
            cannot be loaded.
    """
    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(
            f"{directory / 'config.json'} not found; point model_path at a model directory"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{directory}: cannot load its tokenizer: {exc}") from exc
    chat = ChatTemplate(tokenizer, end_of_turn=end_of_turn)
    device = torch.device(device) if device is not None else pick_device()
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(directory.resolve()), local_files_only=True, dtype=dtype or pick_dtype(device)
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{directory}: cannot load a causal LM from it: {exc}") from exc
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise ValueError(
            f"{directory}: the tokenizer has {len(tokenizer)} tokens but the model's embeddings "
            f"only {rows} rows; the tokenizer does not belong to this model"
        )
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    context_length(model.config)
    return AgentPolicy(model=model.to(device), chat=chat, device=device)
