"""load_policy on tiny causal LMs built here from configs (GPT-2, Llama, Qwen2), saved with a
locally trained tokenizer: special tokens added when missing, LoRA through peft, save and reload."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from training.algorithms.logprobs import token_logprobs
from training.generation import sample_batch
from training.policy import SPECIAL_TOKENS, Policy, load_policy, train_tokenizer

CORPUS = [
    'def add(a, b):\n    """Return a + b."""\n    return a + b\n',
    "def is_even(n):\n    return n % 2 == 0\n",
    "def reverse(s):\n    return s[::-1]\n",
    "for i in range(10):\n    print(i * i)\n",
] * 4
CPU = torch.device("cpu")


def tokenizer_for(with_specials: bool):
    return train_tokenizer(CORPUS, vocab_size=300, special_tokens=None if with_specials else [])


def make_model(kind: str, vocab_size: int, *, seed: int = 0):
    """A tiny model of ``kind`` with random weights: hidden size 32, 2 layers."""
    torch.manual_seed(seed)
    if kind == "gpt2":
        return GPT2LMHeadModel(
            GPT2Config(vocab_size=vocab_size, n_positions=128, n_embd=32, n_layer=2, n_head=2)
        )
    common = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    if kind == "llama":
        return LlamaForCausalLM(LlamaConfig(**common))
    if kind == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common))
    raise AssertionError(kind)


def save_model_dir(directory, kind: str, *, with_specials: bool = True):
    """Write a tiny ``kind`` model and a tokenizer (with or without Crucible's special tokens) to
    ``directory``."""
    tokenizer = tokenizer_for(with_specials)
    model = make_model(kind, tokenizer.get_vocab_size())
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def logits_of(policy: Policy, ids: list[int]) -> torch.Tensor:
    policy.model.eval()
    with torch.no_grad():
        return policy.model(input_ids=torch.tensor([ids], device=policy.device)).logits.float()


def prompt_ids(policy: Policy) -> list[int]:
    return [policy.bos_id, *policy.encode("def add(a, b):\n")]


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2"])
def test_loads_any_causal_lm_and_samples(tmp_path, kind):
    directory = save_model_dir(tmp_path / kind, kind)
    policy = load_policy(directory, device=CPU)
    assert type(policy.model) is type(make_model(kind, 10))
    assert policy.device == CPU and next(policy.model.parameters()).dtype == torch.float32
    assert policy.n_positions == (128 if kind == "gpt2" else 256)
    assert not policy.is_lora
    assert {policy.pad_id, policy.bos_id, policy.end_id, policy.obs_id} == {0, 1, 2, 3}
    vocab = policy.tokenizer.get_vocab_size()
    assert policy.model.get_input_embeddings().weight.shape[0] == vocab, (
        "no resize when the tokens exist"
    )
    samples = sample_batch(
        policy,
        [prompt_ids(policy), [policy.bos_id]],
        max_new_tokens=8,
        generator=torch.Generator().manual_seed(0),
    )
    assert [len(s.token_ids) for s in samples] == [8, 8]
    assert all(0 <= t < vocab for s in samples for t in s.token_ids)
    assert all(lp <= 0 for s in samples for lp in s.logprobs)


def test_missing_special_tokens_are_added_and_embeddings_resized(tmp_path):
    directory = save_model_dir(tmp_path / "m", "llama", with_specials=False)
    original = tokenizer_for(False)
    old_vocab = original.get_vocab_size()
    base = LlamaForCausalLM.from_pretrained(directory)
    policy = load_policy(directory, device=CPU)
    assert [policy.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == list(
        range(old_vocab, old_vocab + 4)
    )
    assert (policy.pad_id, policy.bos_id, policy.end_id, policy.obs_id) == tuple(
        range(old_vocab, old_vocab + 4)
    )
    text = "def reverse(s):\n    return s[::-1]\n"
    assert policy.encode(text) == original.encode(text).ids, "existing tokens keep their ids"
    assert policy.decode([policy.bos_id, *policy.encode(text), policy.end_id]) == text
    embed, head = (
        policy.model.get_input_embeddings().weight,
        policy.model.get_output_embeddings().weight,
    )
    assert embed.shape[0] == head.shape[0] == old_vocab + 4 == policy.model.config.vocab_size
    old_embed, old_head = base.get_input_embeddings().weight, base.get_output_embeddings().weight
    assert torch.equal(embed[:old_vocab], old_embed) and torch.equal(head[:old_vocab], old_head)
    for new, old in ((embed, old_embed), (head, old_head)):
        assert torch.allclose(new[old_vocab:], old.mean(0).expand(4, -1))
    # Special tokens added by text stay whole in encoding.
    assert policy.tokenizer.encode("<|obs|>x", add_special_tokens=False).ids[0] == policy.obs_id
    samples = sample_batch(
        policy,
        [[policy.bos_id, *policy.encode(text)]],
        max_new_tokens=5,
        stop_ids=(policy.end_id,),
        generator=torch.Generator().manual_seed(0),
    )
    assert 1 <= len(samples[0].token_ids) <= 5
    # Loading twice gives the same model (the new rows are not random).
    again = load_policy(directory, device=CPU)
    assert torch.equal(logits_of(policy, prompt_ids(policy)), logits_of(again, prompt_ids(again)))


def test_padded_vocabulary_keeps_its_size(tmp_path):
    """A matrix already larger than the tokenizer (Qwen2 pads its vocabulary) holds the new ids: no
    resize, their rows start at the mean of the others, the padding rows beyond stay as saved."""
    tokenizer = tokenizer_for(False)
    vocab = tokenizer.get_vocab_size()
    model = make_model("qwen2", vocab + 8)
    model.save_pretrained(tmp_path)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    policy = load_policy(tmp_path, device=CPU)
    assert (policy.pad_id, policy.bos_id, policy.end_id, policy.obs_id) == tuple(
        range(vocab, vocab + 4)
    )
    for new, old in (
        (policy.model.get_input_embeddings().weight, model.get_input_embeddings().weight),
        (policy.model.get_output_embeddings().weight, model.get_output_embeddings().weight),
    ):
        assert new.shape[0] == vocab + 8
        others = torch.cat([old[:vocab], old[vocab + 4 :]])
        assert torch.allclose(new[vocab : vocab + 4], others.mean(0).expand(4, -1), atol=1e-6)
        assert torch.equal(new[:vocab], old[:vocab]) and torch.equal(
            new[vocab + 4 :], old[vocab + 4 :]
        )


def test_dtype_is_honoured(tmp_path):
    directory = save_model_dir(tmp_path / "m", "qwen2")
    policy = load_policy(directory, device=CPU, dtype=torch.bfloat16)
    assert {p.dtype for p in policy.model.parameters()} == {torch.bfloat16}
    samples = sample_batch(
        policy, [prompt_ids(policy)], max_new_tokens=4, generator=torch.Generator().manual_seed(0)
    )
    assert len(samples[0].token_ids) == 4


def test_dropout_is_switched_off(tmp_path):
    tokenizer = tokenizer_for(True)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=tokenizer.get_vocab_size(),
            n_positions=64,
            n_embd=32,
            n_layer=1,
            n_head=2,
            resid_pdrop=0.5,
            embd_pdrop=0.5,
            attn_pdrop=0.5,
        )
    )
    model.save_pretrained(tmp_path)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    policy = load_policy(tmp_path, device=CPU)
    policy.model.train()
    ids = torch.tensor([prompt_ids(policy)])
    assert torch.equal(policy.model(input_ids=ids).logits, policy.model(input_ids=ids).logits)


def test_missing_files_raise_naming_them(tmp_path):
    directory = save_model_dir(tmp_path / "m", "gpt2")
    (directory / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_policy(directory, device=CPU)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_policy(empty, device=CPU)


def test_unloadable_config_raises_value_error(tmp_path):
    directory = save_model_dir(tmp_path / "m", "gpt2")
    (directory / "config.json").write_text(json.dumps({"model_type": "no-such-model"}))
    with pytest.raises(ValueError, match="cannot load a causal LM"):
        load_policy(directory, device=CPU)


@pytest.mark.parametrize(
    "lora, message",
    [
        ({"rank": 8}, "unknown LoRA key.*'rank'"),
        ({"r": 0}, "'r'"),
        ({"alpha": -1}, "'alpha'"),
        ({"dropout": 1.0}, "'dropout'"),
        ({"target_modules": []}, "'target_modules'"),
        ({"target_modules": ["no_such_module"]}, "no_such_module"),
    ],
)
def test_bad_lora_settings_raise(tmp_path, lora, message):
    directory = save_model_dir(tmp_path / "m", "llama")
    with pytest.raises(ValueError, match=message):
        load_policy(directory, device=CPU, lora=lora)


def _one_step(policy: Policy) -> None:
    """One AdamW step that raises the log-prob of a fixed sequence."""
    ids = torch.tensor([prompt_ids(policy) + [policy.end_id]])
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    policy.model.train()
    logprobs, _ = token_logprobs(policy.model, ids, torch.ones_like(ids))
    (-logprobs.sum()).backward()
    optimizer.step()


LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def test_lora_trains_only_the_adapters_and_reloads_exactly(tmp_path):
    directory = save_model_dir(tmp_path / "base", "qwen2")
    policy = load_policy(directory, device=CPU, lora=LORA)
    assert policy.is_lora
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_A" in n or "lora_B" in n for n in trainable)
    assert len(trainable) == 2 * 2 * 2, "A and B of q_proj and v_proj in 2 layers"
    frozen = {
        n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad
    }
    adapters = {
        n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad
    }
    before = logits_of(policy, prompt_ids(policy))

    _one_step(policy)

    after = dict(policy.model.named_parameters())
    assert all(torch.equal(after[n], value) for n, value in frozen.items()), (
        "base weights must not move"
    )
    assert all(not torch.equal(after[n], value) for n, value in adapters.items() if "lora_B" in n)
    trained = logits_of(policy, prompt_ids(policy))
    assert not torch.allclose(before, trained)

    saved = tmp_path / "adapter"
    policy.save(saved)
    assert (saved / "adapter_config.json").exists() and (saved / "tokenizer.json").exists()
    assert not (saved / "config.json").exists() and not (saved / "model.safetensors").exists()
    reloaded = load_policy(saved, device=CPU)
    assert reloaded.is_lora
    assert {n for n, p in reloaded.model.named_parameters() if p.requires_grad} == trainable
    assert torch.equal(logits_of(reloaded, prompt_ids(reloaded)), trained)
    assert load_policy(saved, device=CPU, lora=LORA).is_lora, (
        "the settings it was saved with are accepted"
    )
    with pytest.raises(ValueError, match="adapter saved with"):
        load_policy(saved, device=CPU, lora={**LORA, "r": 2})


def test_lora_with_added_tokens_trains_their_rows(tmp_path):
    """A tokenizer without Crucible's tokens under LoRA: the new rows are trainable, the base stays
    frozen, and the saved adapter reloads to identical logits (the rows are re-created the same
    way)."""
    directory = save_model_dir(tmp_path / "base", "llama", with_specials=False)
    policy = load_policy(directory, device=CPU, lora=LORA)
    trainable = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert {n for n in trainable if "lora_" not in n} == {
        "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta.default",
        "base_model.model.lm_head.token_adapter.trainable_tokens_delta.default",
    }
    frozen = {
        n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad
    }
    end_before = logits_of(policy, prompt_ids(policy))[0, -1, policy.end_id]
    _one_step(policy)
    after = dict(policy.model.named_parameters())
    assert all(torch.equal(after[n], value) for n, value in frozen.items())
    trained = logits_of(policy, prompt_ids(policy))
    assert trained[0, -1, policy.end_id] > end_before, (
        "the step raised the new <|end|> token's logit"
    )
    policy.save(tmp_path / "adapter")
    reloaded = load_policy(tmp_path / "adapter", device=CPU)
    assert torch.equal(logits_of(reloaded, prompt_ids(reloaded)), trained)


def test_lora_merged_save_is_a_plain_model(tmp_path):
    directory = save_model_dir(tmp_path / "base", "gpt2")
    policy = load_policy(
        directory, device=CPU, lora={"r": 4, "alpha": 8, "target_modules": ["c_attn"]}
    )
    _one_step(policy)
    trained = logits_of(policy, prompt_ids(policy))
    policy.save(tmp_path / "merged", merge_lora=True)
    assert policy.is_lora, "saving merged leaves the live policy wrapped"
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = load_policy(tmp_path / "merged", device=CPU)
    assert not merged.is_lora and type(merged.model) is GPT2LMHeadModel
    assert torch.allclose(logits_of(merged, prompt_ids(merged)), trained, atol=1e-5)


def test_full_fine_tuning_save_and_reload(tmp_path):
    directory = save_model_dir(tmp_path / "base", "gpt2")
    policy = load_policy(directory, device=CPU)
    assert len(policy.trainable_parameters()) == len(list(policy.model.parameters()))
    _one_step(policy)
    trained = logits_of(policy, prompt_ids(policy))
    policy.save(tmp_path / "saved")
    reloaded = load_policy(tmp_path / "saved", device=CPU)
    assert torch.equal(logits_of(reloaded, prompt_ids(reloaded)), trained)


def test_adapter_whose_base_moved_raises(tmp_path):
    directory = save_model_dir(tmp_path / "base", "qwen2")
    load_policy(directory, device=CPU, lora=LORA).save(tmp_path / "adapter")
    (directory / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_policy(tmp_path / "adapter", device=CPU)
