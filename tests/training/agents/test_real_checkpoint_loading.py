"""A real-architecture checkpoint (Qwen2 config, Qwen2.5's chat template, random weights) loads
with no invented token and no resized embedding, samples a turn that stops on its own
end-of-turn token, and takes a gradient step on the sampled ids."""

import json

import pytest
import torch

from training.agents.chat import ChatTemplateMissing
from training.agents.policy import load_agent_policy
from training.agents.trajectory import AgentTrajectory, AgentTurn
from training.algorithms.logprobs import pad_batch, token_logprobs
from training.generation import sample_batch

from .checkpoints import qwen2_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return qwen2_checkpoint(tmp_path_factory.mktemp("qwen2"))


def test_no_token_is_invented_and_no_embedding_resized(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    vocab = json.loads((checkpoint / "tokenizer.json").read_text())
    policy = load_agent_policy(checkpoint, device="cpu")
    assert type(policy.model).__name__ == "Qwen2ForCausalLM"
    assert policy.model.get_input_embeddings().weight.shape[0] == config["vocab_size"]
    saved = {**vocab["model"]["vocab"], **{t["content"]: t["id"] for t in vocab["added_tokens"]}}
    assert policy.chat.tokenizer.get_vocab() == saved
    assert policy.chat.end_of_turn == "<|im_end|>"
    assert "<|pad|>" not in policy.chat.tokenizer.get_vocab()


def test_a_turn_samples_and_trains_through_the_same_path(checkpoint):
    policy = load_agent_policy(checkpoint, device="cpu", dtype=torch.float32)
    chat = policy.chat
    prompt = chat.prompt_ids([{"role": "user", "content": "Fix add."}])
    [sample] = sample_batch(
        policy,
        [prompt],
        max_new_tokens=12,
        stop_ids=(policy.end_id,),
        generator=torch.Generator().manual_seed(0),
    )
    trajectory = AgentTrajectory.start(prompt, [], limit=policy.n_positions)
    trajectory.add_turn(
        AgentTurn(
            0,
            sample.token_ids,
            sample.logprobs,
            chat.decode(sample.token_ids),
            sample.stopped,
            message={"role": "assistant", "content": ""},
        )
    )
    ids, mask = trajectory.sequence_and_mask()
    batch, attention, loss_mask = pad_batch([ids], [mask], policy.pad_id, policy.device)
    logprobs, _entropy = token_logprobs(policy.model, batch, attention)
    recomputed = logprobs[0, len(prompt) : len(ids)]
    assert torch.allclose(recomputed, torch.tensor(sample.logprobs), atol=1e-4)
    loss = -(logprobs * loss_mask).sum()
    loss.backward()
    grads = [p.grad for p in policy.trainable_parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)


def test_a_checkpoint_without_a_chat_template_is_refused(checkpoint, tmp_path):
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes((checkpoint / name).read_bytes())
    settings = json.loads((checkpoint / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(ChatTemplateMissing, match="tokenizer_config.json"):
        load_agent_policy(tmp_path, device="cpu")
