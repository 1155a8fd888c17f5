"""On real multi-turn rollouts (real policy, real sandbox): the trained sequence is exactly the
sampled ids plus observation ids, and only the sampled ids are trained on."""

import pytest
import torch

from tests.training.rollouts import ADD_PROMPT, add_task, tiny_policy
from training.agents.trajectory import RUN_CODE
from training.algorithms.logprobs import pad_batch, token_logprobs
from training.rollout import RolloutConfig, collect_rollouts

PROMPT = ADD_PROMPT
HIDDEN = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
    "    assert candidate(-1, 1) == 0\n"
)
VISIBLE = "def check(candidate):\n    assert candidate(1, 2) == 3\n"


@pytest.fixture(scope="module")
def rollouts():
    torch.manual_seed(0)
    policy = tiny_policy()
    task = add_task(visible=VISIBLE, hidden=HIDDEN)
    config = RolloutConfig(rollout_mode="completion", group_size=3, max_turns=2, max_new_tokens=24)
    out, times = collect_rollouts(
        policy, [task], config, generator=torch.Generator().manual_seed(1)
    )
    return policy, out, times


def test_untrained_policy_fails_and_gets_observations(rollouts):
    _policy, out, times = rollouts
    assert len(out) == 3
    assert all(len(r.turns) == 2 for r in out), (
        "a random policy should fail the visible test and revise"
    )
    assert all(r.turns[0].observation_ids and r.turns[0].sandbox_status for r in out)
    assert all(r.status and r.tests_total == 3 for r in out)
    assert times.generation_s > 0 and times.sandbox_s > 0 and times.grading_s > 0


def test_sequence_is_the_concatenation_of_ids(rollouts):
    policy, out, _ = rollouts
    for r in out:
        ids, mask = r.sequence_and_mask()
        t0, t1 = r.turns
        assert (
            ids
            == [policy.bos_id, *policy.encode(PROMPT)]
            + t0.token_ids
            + t0.observation_ids
            + t1.token_ids
        )
        assert t0.observation_ids[0] == policy.obs_id
        expected_mask = (
            [0] * len(r.prompt_ids)
            + [1] * len(t0.token_ids)
            + [0] * len(t0.observation_ids)
            + [1] * len(t1.token_ids)
        )
        assert mask == expected_mask


def test_trained_tokens_are_the_sampled_tokens(rollouts):
    """Recomputing log-probs over the stored sequence reproduces the sampling log-probs at every
    masked position: the ids trained on are the ids sampled, in the context they were sampled in."""
    policy, out, _ = rollouts
    sequences, masks = zip(*(r.sequence_and_mask() for r in out))
    ids, attention, mask = pad_batch(list(sequences), list(masks), policy.pad_id, policy.device)
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy.model, ids, attention)
    for row, r in enumerate(out):
        sampled = [lp for t in r.turns for lp in t.logprobs]
        recomputed = logprobs[row][mask[row].bool()].tolist()
        assert recomputed == pytest.approx(sampled, abs=1e-4)


def test_code_run_is_the_prompt_plus_the_decoded_sample(rollouts):
    policy, out, _ = rollouts
    for r in out:
        for turn in r.turns:
            assert turn.code == PROMPT + policy.decode(turn.token_ids)
        assert r.final_code == r.turns[-1].code


def test_completion_turns_are_recorded_as_programs_run(rollouts):
    """The replay draws a completion turn as its program and its visible-test result; the code
    detectors read the last result."""
    _policy, out, _ = rollouts
    for r in out:
        assert r.last_visible is not None and r.last_visible.tests_total == 1
        for turn in r.turns:
            assert turn.action == RUN_CODE
            assert turn.sandbox_result["status"] == turn.sandbox_status
        assert "visible tests passed" in r.turns[0].observation
        assert r.turns[-1].observation == ""  # the last program was shown nothing
        assert r.opening is None  # the replay shows the task version's prompt as the opening
