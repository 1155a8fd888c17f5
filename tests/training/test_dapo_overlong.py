"""DAPO's soft overlong punishment (eq. 13) against values worked out by hand."""

import pytest
import torch

from training.algorithms.dapo import overlong_penalty


def test_penalty_by_hand_around_both_thresholds():
    lengths = torch.tensor([10, 16, 17, 18, 20, 21, 100])
    penalty = overlong_penalty(lengths, max_length=20, cache_length=4)
    # soft start 20 - 4 = 16
    # 10, 16 <= 16          -> 0
    # 17: (16 - 17) / 4     -> -0.25
    # 18: (16 - 18) / 4     -> -0.5
    # 20: (16 - 20) / 4     -> -1.0  (the ramp reaches -1 at max_length)
    # 21, 100 > 20          -> -1
    assert penalty.tolist() == [0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0]
    assert penalty.dtype == torch.float32


def test_penalty_with_the_papers_lengths():
    lengths = torch.tensor([16384, 17408, 18432, 20480, 20481])
    penalty = overlong_penalty(lengths, max_length=20480, cache_length=4096)
    # soft start 16384: 0 ; (16384 - 17408) / 4096 = -0.25 ; -2048/4096 = -0.5 ;
    # -4096/4096 = -1 ; beyond -> -1
    assert penalty.tolist() == [0.0, -0.25, -0.5, -1.0, -1.0]


def test_cache_as_long_as_the_limit_ramps_from_zero():
    penalty = overlong_penalty(torch.tensor([0, 5, 10, 11]), max_length=10, cache_length=10)
    # soft start 0: 0 -> 0 ; (0 - 5) / 10 = -0.5 ; (0 - 10) / 10 = -1 ; 11 > 10 -> -1
    assert penalty.tolist() == [0.0, -0.5, -1.0, -1.0]


def test_cache_of_one_token_is_a_step():
    penalty = overlong_penalty(torch.tensor([9, 10, 11]), max_length=10, cache_length=1)
    # soft start 9: 9 -> 0 ; (9 - 10) / 1 = -1 ; 11 -> -1
    assert penalty.tolist() == [0.0, -1.0, -1.0]


@pytest.mark.parametrize("cache_length", [0, -3, 21])
def test_cache_length_outside_one_to_max_length_is_an_error(cache_length):
    with pytest.raises(ValueError, match="cache_length"):
        overlong_penalty(torch.tensor([5]), max_length=20, cache_length=cache_length)
