"""sample_batch: the KV cache changes nothing but speed, log-probs are those of a full forward pass
(token in, token out), stop ids and multi-token stop sequences end rows, top-p filters, bad input is
refused."""

from __future__ import annotations

import pytest
import torch

from tests.training.test_policy_loading import CORPUS, save_model_dir
from training.generation import _draw, _top_p_filter, sample_batch
from training.policy import Policy, build_default_policy, load_policy

CPU = torch.device("cpu")


@pytest.fixture(scope="module", params=["gpt2-default", "llama", "qwen2-lora"])
def policy(request, tmp_path_factory) -> Policy:
    if request.param == "gpt2-default":
        return build_default_policy(
            CORPUS, vocab_size=300, n_embd=32, n_layer=2, n_head=2, n_positions=64, device=CPU
        )
    kind, _, lora = request.param.partition("-")
    directory = save_model_dir(tmp_path_factory.mktemp(kind), kind, with_specials=kind != "llama")
    loaded = load_policy(
        directory,
        device=CPU,
        lora={"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]} if lora else None,
    )
    if lora:  # non-zero adapters, so they take part in the forward pass
        with torch.no_grad():
            for name, param in loaded.model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    return loaded


def contexts_of(policy: Policy) -> list[list[int]]:
    """Contexts of different lengths (1, 6 and about 20 tokens), so the batch is left-padded."""
    return [
        [policy.bos_id],
        [policy.bos_id, *policy.encode("def add(a, b):")][:6],
        [policy.bos_id, *policy.encode('def add(a, b):\n    """Return a + b."""\n')][:20],
    ]


def sample(policy, contexts, seed=0, **kwargs):
    kwargs.setdefault("max_new_tokens", 16)
    return sample_batch(policy, contexts, generator=torch.Generator().manual_seed(seed), **kwargs)


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_cached_and_uncached_sampling_agree(policy, temperature, top_p):
    contexts = contexts_of(policy)
    assert len({len(c) for c in contexts}) == 3
    cached = sample(policy, contexts, temperature=temperature, top_p=top_p, use_cache=True)
    uncached = sample(policy, contexts, temperature=temperature, top_p=top_p, use_cache=False)
    assert [s.token_ids for s in cached] == [s.token_ids for s in uncached]
    for a, b in zip(cached, uncached):
        assert len(a.token_ids) == len(a.logprobs) == 16 and not a.stopped
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_logprobs_are_those_of_a_full_forward_pass(policy, use_cache):
    """Each row alone, unpadded: log_softmax(logits / T) of the final sequence at the sampled
    ids."""
    temperature = 0.8
    contexts = contexts_of(policy)
    samples = sample(policy, contexts, temperature=temperature, use_cache=use_cache)
    policy.model.eval()
    for context, s in zip(contexts, samples):
        ids = torch.tensor([context + s.token_ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits.float()[0]
        log_dist = torch.log_softmax(logits / temperature, dim=-1)
        positions = torch.arange(len(context) - 1, ids.shape[1] - 1)
        expected = log_dist[positions, torch.tensor(s.token_ids)]
        assert torch.allclose(torch.tensor(s.logprobs), expected, atol=1e-4)


def test_training_mode_is_restored(policy):
    policy.model.train()
    sample(policy, contexts_of(policy), max_new_tokens=2)
    assert policy.model.training
    policy.model.eval()
    sample(policy, contexts_of(policy), max_new_tokens=2)
    assert not policy.model.training


@pytest.mark.parametrize("use_cache", [True, False])
def test_stop_ids_end_rows(policy, use_cache):
    contexts = contexts_of(policy)
    free = sample(policy, contexts, use_cache=use_cache)
    stop = free[0].token_ids[5]
    stopped = sample(policy, contexts, stop_ids=(stop,), use_cache=use_cache)
    for f, s in zip(free, stopped):
        if stop in f.token_ids:
            end = f.token_ids.index(stop) + 1
            assert (
                s.stopped
                and s.token_ids == f.token_ids[:end]
                and s.logprobs == pytest.approx(f.logprobs[:end])
            )
        else:
            assert not s.stopped and s.token_ids == f.token_ids
    assert (
        stopped[0].stopped and len(stopped[0].token_ids) <= 6 and stopped[0].token_ids[-1] == stop
    )


@pytest.mark.parametrize("use_cache", [True, False])
def test_stop_sequences_end_rows_and_keep_the_sequence(policy, use_cache):
    contexts = contexts_of(policy)
    free = sample(policy, contexts, use_cache=use_cache)
    pair = tuple(free[1].token_ids[3:5])
    never = (policy.obs_id, policy.obs_id, policy.obs_id)
    stopped = sample(policy, contexts, stop_sequences=(never, pair), use_cache=use_cache)
    for f, s in zip(free, stopped):
        hits = [i + 2 for i in range(len(f.token_ids) - 1) if tuple(f.token_ids[i : i + 2]) == pair]
        if hits:
            assert (
                s.stopped
                and s.token_ids == f.token_ids[: hits[0]]
                and tuple(s.token_ids[-2:]) == pair
            )
        else:
            assert not s.stopped and s.token_ids == f.token_ids
    assert stopped[1].stopped and len(stopped[1].token_ids) <= 5


def test_stop_sequences_match_sampled_ids_only(policy):
    """A sequence whose first id ends the context and whose second is the first sampled id does not
    stop."""
    contexts = contexts_of(policy)
    free = sample(policy, contexts)
    pair = (contexts[2][-1], free[2].token_ids[0])
    stopped = sample(policy, contexts, stop_sequences=(pair,))
    assert len(stopped[2].token_ids) > 1 or not stopped[2].stopped
    assert stopped[2].token_ids[0] == free[2].token_ids[0]


def test_single_token_stop_sequence_acts_like_a_stop_id(policy):
    contexts = contexts_of(policy)
    stop = sample(policy, contexts)[2].token_ids[2]
    by_id = sample(policy, contexts, stop_ids=(stop,))
    by_sequence = sample(policy, contexts, stop_sequences=((stop,),))
    assert by_id == by_sequence


def test_tiny_top_p_is_greedy(policy):
    contexts = contexts_of(policy)
    samples = sample(policy, contexts, top_p=1e-6, max_new_tokens=8)
    for context, s in zip(contexts, samples):
        ids = list(context)
        for token in s.token_ids:
            with torch.no_grad():
                logits = policy.model(input_ids=torch.tensor([ids])).logits[0, -1]
            assert token == int(logits.argmax())
            ids.append(token)
    # With the whole vocabulary, some sampled id is not the argmax (the model is random).
    assert sample(policy, contexts, max_new_tokens=8) != samples


def test_dynamic_cache_gives_the_same_samples(policy):
    """A model transformers does not mark static-cache capable keeps its default (dynamic) cache."""
    contexts = contexts_of(policy)
    static = sample(policy, contexts, temperature=0.9)
    base = (
        policy.model.get_base_model() if hasattr(policy.model, "get_base_model") else policy.model
    )
    base._can_compile_fullgraph = False
    try:
        dynamic = sample(policy, contexts, temperature=0.9)
    finally:
        del base._can_compile_fullgraph
    assert [s.token_ids for s in dynamic] == [s.token_ids for s in static]
    for a, b in zip(static, dynamic):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)


def test_draws_follow_the_probabilities_and_skip_zeros():
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3, 0.0]]).expand(40_000, -1)
    ids = _draw(probs, torch.Generator().manual_seed(0))
    frequencies = torch.bincount(ids, minlength=5).float() / len(ids)
    assert torch.allclose(frequencies, probs[0], atol=0.01)
    assert frequencies[1] == 0 and frequencies[4] == 0
    one_hot = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]]).expand(1000, -1)
    assert bool((_draw(one_hot, torch.Generator().manual_seed(1)) == 2).all())


def test_top_p_filter_keeps_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([[0.05, 0.5, 0.15, 0.3]]))
    kept = lambda p: torch.isfinite(_top_p_filter(logits, p))[0].tolist()  # noqa: E731
    assert kept(0.5) == [False, True, False, False]
    assert kept(0.8) == [False, True, False, True]
    assert kept(0.81) == [False, True, True, True]
    assert kept(1.0) == [True, True, True, True]


def test_top_p_sampling_never_leaves_the_nucleus(policy):
    contexts = contexts_of(policy)
    top_p = 0.5
    samples = sample(policy, contexts, top_p=top_p, max_new_tokens=8, use_cache=False)
    for context, s in zip(contexts, samples):
        ids = list(context)
        for token in s.token_ids:
            with torch.no_grad():
                logits = policy.model(input_ids=torch.tensor([ids])).logits[:, -1].float()
            assert torch.isfinite(_top_p_filter(logits, top_p)[0, token])
            ids.append(token)


def test_bad_arguments_raise(policy):
    good = [[policy.bos_id]]
    limit = policy.n_positions - 4
    cases = [
        dict(temperature=0.0),
        dict(temperature=-1.0),
        dict(temperature=float("nan")),
        dict(top_p=0.0),
        dict(top_p=1.5),
        dict(max_new_tokens=0),
        dict(stop_sequences=((),)),
    ]
    for kwargs in cases:
        with pytest.raises(ValueError):
            sample_batch(policy, good, **{"max_new_tokens": 4, **kwargs})
    with pytest.raises(ValueError, match="context of 0 tokens"):
        sample_batch(policy, [[policy.bos_id], []], max_new_tokens=4)
    with pytest.raises(ValueError, match=f"context of {limit + 1} tokens"):
        sample_batch(policy, [[policy.bos_id] * (limit + 1)], max_new_tokens=4)
    assert len(sample_batch(policy, [[policy.bos_id] * limit], max_new_tokens=4)[0].token_ids) == 4
    assert sample_batch(policy, [], max_new_tokens=4) == []
