"""The policy: a tokenizer and a causal LM, built locally or loaded from a directory.

The default policy is built on this machine with no downloads: a byte-level BPE
tokenizer trained with ``tokenizers`` on the task corpus, and a small GPT-2 shaped
transformer from a ``transformers`` config with random initial weights.

:func:`load_policy` loads any Hugging Face causal LM from a local directory
(``config.json``, the weights, ``tokenizer.json``), optionally wrapped with LoRA
adapters through ``peft``. Crucible's rollouts need four special tokens (``<|bos|>``,
``<|end|>``, ``<|obs|>``, ``<|pad|>``); a tokenizer that lacks them gets them added
and the model's embeddings grow to match (see :func:`load_policy`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, PreTrainedModel

BOS, END, OBS, PAD = "<|bos|>", "<|end|>", "<|obs|>", "<|pad|>"
SPECIAL_TOKENS = [PAD, BOS, END, OBS]

# The keys of load_policy's ``lora`` dict, with their defaults.
LORA_DEFAULTS = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": None}
ADAPTER_CONFIG = "adapter_config.json"


@dataclass
class Policy:
    """A model and its tokenizer, with the ids of the special tokens.

    ``model`` is a ``transformers`` causal LM, or a ``peft.PeftModel`` around one when
    loaded with LoRA (then only the adapter weights require grad).
    """

    model: torch.nn.Module
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

    @property
    def n_positions(self) -> int:
        """The longest sequence the model accepts, in tokens (prompt and sampled ids together).

        Read from the model config's ``n_positions`` (GPT-2) or ``max_position_embeddings``
        (Llama, Qwen2, most others).

        Raises:
            ValueError: the config has neither.
        """
        return context_length(self.model.config)

    @property
    def is_lora(self) -> bool:
        """True when ``model`` is a ``peft`` model (LoRA adapters on a frozen base)."""
        return hasattr(self.model, "peft_config")

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters an optimizer should update: all of them, or only the adapters' under
        LoRA."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` with special tokens dropped."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def save(
        self, directory: Path, *, merge_lora: bool = False, state_dict: dict | None = None
    ) -> None:
        """Write the policy to ``directory`` (created if missing) so :func:`load_policy` reads it
        back.

        Without LoRA: ``config.json``, the weights (``model.safetensors``) and ``tokenizer.json``,
        a plain Hugging Face directory.

        With LoRA (default, ``merge_lora=False``): the adapter only (``adapter_config.json``,
        ``adapter_model.safetensors``, some MB) and ``tokenizer.json``. The adapter config
        records the base model's directory (absolute path); :func:`load_policy` reloads that
        base, adds the special tokens the same deterministic way, and puts the adapter back,
        trainable: logits are bit-identical to the saved policy's. The adapter is the default
        because merging rounds ``W + BA`` into the base dtype (bf16 on GPUs, which changes the
        policy's log-probs measurably), because a checkpoint of a 7B base would otherwise
        weigh 15 GB instead of a few MB, and because training can resume on the same adapter.
        The base directory must stay where it was.

        With LoRA and ``merge_lora=True``: the adapters merged into a copy of the base
        (needs memory for a second copy of the model), written as a plain Hugging Face
        directory that needs neither peft nor the base; for export and serving.

        ``state_dict`` (full fine-tuning only): the weights to write instead of the model's own
        (the float32 master weights gathered from FSDP2's shards, when the model itself is the
        rollouts' bfloat16 copy).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.is_lora and merge_lora:
            copy.deepcopy(self.model).merge_and_unload().save_pretrained(directory)
        elif self.is_lora:
            # The added special-token rows are re-created deterministically on load, so the
            # (large) embedding matrices need not be saved with the adapter.
            self.model.save_pretrained(directory, save_embedding_layers=False)
        else:
            self.model.save_pretrained(directory, state_dict=state_dict)
        self.tokenizer.save(str(directory / "tokenizer.json"))


def context_length(config) -> int:
    """``n_positions`` or ``max_position_embeddings`` of a ``transformers`` config, in tokens.

    Raises:
        ValueError: the config has neither.
    """
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        f"{type(config).__name__} has neither n_positions nor max_position_embeddings: "
        f"Crucible needs the model's context length"
    )


def pick_device() -> torch.device:
    """CUDA when present, the CPU otherwise."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pick_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on a CUDA device that supports it, float32 otherwise."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def train_tokenizer(
    corpus: list[str], *, vocab_size: int = 2048, special_tokens: list[str] | None = None
) -> Tokenizer:
    """A byte-level BPE tokenizer trained on ``corpus`` (every byte is representable).

    Args:
        special_tokens: the special tokens it gets first ids for; Crucible's four by default.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS if special_tokens is None else special_tokens,
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
    """Train a tokenizer on ``corpus`` and build a fresh small GPT-2 around it (float32).

    Args:
        corpus: texts (prompts, solutions) the tokenizer learns merges from.
        n_positions: the longest sequence, in tokens, the model accepts.
        seed: seeds the weight initialisation, so equal seeds give equal models.
    """
    tokenizer = train_tokenizer(corpus, vocab_size=vocab_size)
    device = device or pick_device()
    model = small_gpt2(
        tokenizer.get_vocab_size(),
        (tokenizer.token_to_id(BOS), tokenizer.token_to_id(END), tokenizer.token_to_id(PAD)),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        seed=seed,
    )
    return Policy(model=model.to(device), tokenizer=tokenizer, device=device)


def small_gpt2(
    vocab_size: int,
    bos_eos_pad: tuple[int, int, int],
    *,
    n_positions: int,
    n_embd: int,
    n_layer: int,
    n_head: int,
    seed: int,
) -> GPT2LMHeadModel:
    """A fresh GPT-2 (float32, no dropout) of ``vocab_size`` ids, its weights seeded by
    ``seed``; ``bos_eos_pad`` are the config's bos, eos and pad ids."""
    torch.manual_seed(seed)
    bos, eos, pad = bos_eos_pad
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return GPT2LMHeadModel(config)


def _lora_settings(lora: dict) -> dict:
    """``lora`` completed with the defaults of :data:`LORA_DEFAULTS`.

    Raises:
        ValueError: an unknown key, or a value of the wrong type or range.
    """
    if not isinstance(lora, dict):
        raise ValueError(f"lora must be a dict like {LORA_DEFAULTS}, got {lora!r}")
    unknown = sorted(set(lora) - set(LORA_DEFAULTS))
    if unknown:
        raise ValueError(
            f"unknown LoRA key(s) {', '.join(map(repr, unknown))}; known keys: "
            f"{', '.join(LORA_DEFAULTS)}"
        )
    settings = {**LORA_DEFAULTS, **lora}
    r, alpha, dropout, targets = (
        settings["r"],
        settings["alpha"],
        settings["dropout"],
        settings["target_modules"],
    )
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"LoRA key 'r' must be an int >= 1, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise ValueError(f"LoRA key 'alpha' must be a number > 0, got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"LoRA key 'dropout' must be in [0, 1), got {dropout!r}")
    if (
        targets is not None
        and targets != "all-linear"
        and (
            not isinstance(targets, (list, tuple))
            or not targets
            or not all(isinstance(t, str) and t for t in targets)
        )
    ):
        raise ValueError(
            f"LoRA key 'target_modules' must be a non-empty list of module names or 'all-linear', "
            f"got {targets!r}"
        )
    if isinstance(targets, tuple):
        settings["target_modules"] = list(targets)
    return settings


def _same_lora(settings: dict, saved: dict) -> bool:
    """Whether checked ``lora`` settings describe the adapter of ``adapter_config.json``
    ``saved``."""

    def modules(value):
        return sorted(value) if isinstance(value, (list, tuple, set)) else value

    targets = (
        settings["target_modules"]
        if settings["target_modules"] is not None
        else saved.get("target_modules")
    )
    return (
        settings["r"] == saved.get("r")
        and settings["alpha"] == saved.get("lora_alpha")
        and float(settings["dropout"]) == saved.get("lora_dropout")
        and modules(targets) == modules(saved.get("target_modules"))
    )


def _disable_dropout(model: torch.nn.Module) -> None:
    """Zero every dropout of ``model``: the log-probs the trainer recomputes must equal the sampled
    ones."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0


def _add_special_tokens(model: PreTrainedModel, tokenizer: Tokenizer) -> list[int]:
    """Give ``tokenizer`` the Crucible special tokens it lacks and grow ``model``'s embeddings to
    fit.

    Added tokens take the next free ids in :data:`SPECIAL_TOKENS` order. When an id falls
    past the embedding matrix, the input (and untied output) embeddings are resized. The
    rows of every added token (also those inside a matrix padded beyond the tokenizer, as
    Qwen2's is) are set to the mean of the other rows: a deterministic start, so loading
    the same directory twice gives the same model.

    Returns:
        The ids of the special tokens that were added (empty when none were missing).
    """
    missing = [token for token in SPECIAL_TOKENS if tokenizer.token_to_id(token) is None]
    if missing:
        tokenizer.add_special_tokens(missing)
    added = [tokenizer.token_to_id(token) for token in missing]
    needed = max(tokenizer.get_vocab(with_added_tokens=True).values()) + 1
    old_rows = model.get_input_embeddings().weight.shape[0]
    if needed > old_rows:
        model.resize_token_embeddings(needed, mean_resizing=False)
    new_rows = sorted(set(added) | set(range(old_rows, needed)))
    if new_rows:
        layers = [model.get_input_embeddings(), model.get_output_embeddings()]
        with torch.no_grad():
            for weight in {
                id(layer.weight): layer.weight for layer in layers if layer is not None
            }.values():
                others = torch.ones(weight.shape[0], dtype=torch.bool, device=weight.device)
                others[new_rows] = False
                weight[new_rows] = weight[others].float().mean(dim=0).to(weight.dtype)
    return added


def _module_name(model: torch.nn.Module, target: torch.nn.Module) -> str:
    return next(name for name, module in model.named_modules() if module is target)


def _load_base(
    directory: Path, tokenizer: Tokenizer, dtype: torch.dtype
) -> tuple[PreTrainedModel, list[int]]:
    """The causal LM of ``directory`` in ``dtype``, dropout off, grown to ``tokenizer``'s special
    tokens."""
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(directory.resolve()), local_files_only=True, dtype=dtype
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{directory}: cannot load a causal LM from it: {exc}") from exc
    context_length(model.config)
    _disable_dropout(model)
    return model, _add_special_tokens(model, tokenizer)


def _require(directory: Path, name: str) -> Path:
    path = directory / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; point model_path at a saved policy or Hugging Face model directory"
        )
    return path


def load_policy(
    directory: Path,
    *,
    device: torch.device | None = None,
    lora: dict | None = None,
    dtype: torch.dtype | None = None,
) -> Policy:
    """Load a causal LM and its tokenizer from a local directory; nothing is downloaded.

    ``directory`` is either

    - a Hugging Face model directory (``config.json``, the weights, ``tokenizer.json``),
      loaded with ``AutoModelForCausalLM``: GPT-2, Llama, Qwen2 and any other causal LM
      ``transformers`` knows; or one written by :meth:`Policy.save`;
    - a LoRA adapter directory written by :meth:`Policy.save` (``adapter_config.json``,
      ``adapter_model.safetensors``, ``tokenizer.json``): its base model is loaded from
      the directory the adapter config names, and the adapter is put back, trainable.

    Special tokens: when ``tokenizer.json`` lacks any of ``<|pad|>``, ``<|bos|>``,
    ``<|end|>``, ``<|obs|>``, they are added to the tokenizer (next free ids) and the
    model's embedding matrices are resized to hold them, new rows set to the mean of the
    existing ones. The model has never seen these tokens: it learns them in SFT or RL.
    Under LoRA the rows of the added tokens (input embedding and, when untied, output
    embedding) are trained too, through peft's ``trainable_token_indices``; the rest of
    the base stays frozen. The model's own EOS token is not a stop token for Crucible.

    Dropout is switched off everywhere in the base model (as TRL does for RL): the
    trainer recomputes the log-probs of sampled tokens and they must match.

    Args:
        directory: the model (or adapter) directory.
        device: where the model goes; CUDA when available, else the CPU.
        lora: wrap the model in LoRA adapters, only they being trainable:
            ``{"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}``
            (missing keys take these defaults; ``target_modules`` None lets peft pick the
            architecture's usual attention projections, "all-linear" targets every linear
            layer). None: full fine-tuning. For an adapter directory, None or the settings it
            was saved with.
        dtype: the weights' dtype; bfloat16 on a CUDA device that supports it, float32
            otherwise. LoRA adapter weights stay float32 (peft's default). Full fine-tuning
            of bfloat16 weights loses updates smaller than their precision; pass
            ``torch.float32`` for it when memory allows.

    Raises:
        FileNotFoundError: ``directory`` lacks ``config.json`` (or ``adapter_config.json``)
            or ``tokenizer.json``, or an adapter's base directory lacks ``config.json``.
        ValueError: an unknown LoRA key or a bad LoRA value; LoRA settings that differ from
            a saved adapter's; a config ``transformers`` cannot load as a causal LM, or
            with no context length.
    """
    directory = Path(directory)
    adapter = (directory / ADAPTER_CONFIG).is_file()
    if not adapter:
        _require(directory, "config.json")
    tokenizer = Tokenizer.from_file(str(_require(directory, "tokenizer.json")))
    settings = _lora_settings(lora) if lora is not None else None
    device = torch.device(device) if device is not None else pick_device()
    dtype = dtype or pick_dtype(device)

    if adapter:
        from peft import PeftModel  # noqa: PLC0415 (peft takes seconds to load; LoRA only)

        saved = json.loads((directory / ADAPTER_CONFIG).read_text())
        if settings is not None and not _same_lora(settings, saved):
            raise ValueError(
                f"{directory} holds a LoRA adapter saved with r={saved.get('r')}, "
                f"alpha={saved.get('lora_alpha')}, dropout={saved.get('lora_dropout')}, "
                f"target_modules={saved.get('target_modules')}; lora={lora} differs "
                f"(pass lora=None to load it as saved)"
            )
        base = Path(saved.get("base_model_name_or_path") or "")
        _require(base, "config.json")
        model, _added = _load_base(base, tokenizer, dtype)
        model = PeftModel.from_pretrained(model, str(directory), is_trainable=True)
    else:
        model, added = _load_base(directory, tokenizer, dtype)
        if settings is not None:
            from peft import LoraConfig, get_peft_model  # noqa: PLC0415 (as PeftModel above)

            trainable_tokens = None
            if added:
                trainable_tokens = {
                    _module_name(model, model.get_input_embeddings()).rsplit(".", 1)[-1]: added
                }
                output = model.get_output_embeddings()
                if output is not None and output.weight is not model.get_input_embeddings().weight:
                    trainable_tokens[_module_name(model, output).rsplit(".", 1)[-1]] = added
            # GPT-2 style models store their projections as Conv1D (weights transposed).
            conv1d = any(type(module).__name__ == "Conv1D" for module in model.modules())
            config = LoraConfig(
                task_type="CAUSAL_LM",
                fan_in_fan_out=conv1d,
                r=settings["r"],
                lora_alpha=settings["alpha"],
                lora_dropout=float(settings["dropout"]),
                target_modules=settings["target_modules"],
                trainable_token_indices=trainable_tokens,
            )
            try:
                model = get_peft_model(model, config)
            except ValueError as exc:
                raise ValueError(f"LoRA {lora} on {directory}: {exc}") from exc
    return Policy(model=model.to(device), tokenizer=tokenizer, device=device)
