"""core.packed: token ids and log-probs as packed binary arrays."""

from __future__ import annotations

import math

import pytest
from django.db import connection

from core.packed import PackedArrayField, pack, unpack


def test_ids_and_logprobs_round_trip_exactly():
    ids = [0, 1, 151_935, 2**31 - 1]
    logprobs = [-0.1, -1e-300, -math.pi, 0.0, -(2.0**-1074)]
    assert unpack(pack(ids, "i"), "i") == ids
    assert unpack(pack(logprobs, "d"), "d") == logprobs  # float64: bit for bit
    assert pack(ids, "i")[:4] == b"\x00\x00\x00\x00" and pack([1], "i") == b"\x01\x00\x00\x00"


def test_a_value_of_the_wrong_kind_is_refused_by_name():
    field = PackedArrayField(typecode="i")
    field.set_attributes_from_name("token_ids")
    with pytest.raises(TypeError, match="token_ids: expected a list of int32 ids"):
        field.get_db_prep_value(["a"], connection)
    with pytest.raises(TypeError, match="token_ids"):
        field.get_db_prep_value([2**40], connection)
    with pytest.raises(ValueError, match="typecode"):
        PackedArrayField(typecode="q")


def test_truncated_bytes_are_an_error_not_a_short_list():
    with pytest.raises(ValueError):
        unpack(b"\x01\x00\x00", "i")
