"""The policy: a tokenizer and a causal LM, built locally or loaded from a directory.

The default policy is built on this machine with no downloads: a byte-level BPE
tokenizer trained with ``tokenizers`` on the task corpus, and a small GPT-2 shaped
transformer from a ``transformers`` config with random initial weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedModel

BOS, END, OBS, PAD = "<|bos|>", "<|end|>", "<|obs|>", "<|pad|>"
SPECIAL_TOKENS = [PAD, BOS, END, OBS]


@dataclass
class Policy:
    """A model and its tokenizer, with the ids of the special tokens."""

    model: PreTrainedModel
    tokenizer: Tokenizer
    device: torch.device

    @property
    def pad_id(self) -> int:
        return self.tokenizer.token_to_id(PAD)

    @property
    def bos_id(self) -> int:
        return self.tokenizer.token_to_id(BOS)

    @property
    def end_id(self) -> int:
        return self.tokenizer.token_to_id(END)

    @property
    def obs_id(self) -> int:
        return self.tokenizer.token_to_id(OBS)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` with special tokens dropped."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def save(self, directory: Path) -> None:
        """Write ``config.json``, the weights and ``tokenizer.json`` to ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save(str(directory / "tokenizer.json"))


def pick_device() -> torch.device:
    """CUDA when present, the CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train_tokenizer(corpus: list[str], *, vocab_size: int = 2048) -> Tokenizer:
    """A byte-level BPE tokenizer trained on ``corpus`` (every byte is representable)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return tokenizer


def build_default_policy(
    corpus: list[str],
    *,
    vocab_size: int = 2048,
    n_embd: int = 128,
    n_layer: int = 2,
    n_head: int = 4,
    n_positions: int = 1024,
    seed: int = 0,
    device: torch.device | None = None,
) -> Policy:
    """Train a tokenizer on ``corpus`` and build a fresh small GPT-2 around it.

    Args:
        corpus: texts (prompts, solutions) the tokenizer learns merges from.
        n_positions: the longest sequence, in tokens, the model accepts.
        seed: seeds the weight initialisation, so equal seeds give equal models.
    """
    tokenizer = train_tokenizer(corpus, vocab_size=vocab_size)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=tokenizer.get_vocab_size(),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=tokenizer.token_to_id(BOS),
        eos_token_id=tokenizer.token_to_id(END),
        pad_token_id=tokenizer.token_to_id(PAD),
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    device = device or pick_device()
    return Policy(model=GPT2LMHeadModel(config).to(device), tokenizer=tokenizer, device=device)


def load_policy(directory: Path, *, device: torch.device | None = None) -> Policy:
    """Load a policy saved by :meth:`Policy.save` (or any GPT-2 directory with tokenizer.json).

    Raises:
        FileNotFoundError: ``directory`` lacks ``config.json`` or ``tokenizer.json``.
    """
    for name in ("config.json", "tokenizer.json"):
        if not (directory / name).exists():
            raise FileNotFoundError(f"{directory / name} not found; point model_path at a saved policy directory")
    device = device or pick_device()
    model = GPT2LMHeadModel.from_pretrained(directory).to(device)
    return Policy(model=model, tokenizer=Tokenizer.from_file(str(directory / "tokenizer.json")), device=device)
