"""training.turn_writer: a step's turns in bulk (COPY on PostgreSQL, executemany on SQLite),
read back exactly through the ORM, inside the caller's transaction."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from tests.training.conftest import one_task_run
from training.models import Trajectory, Turn
from training.selectors import trajectory_turns
from training.turn_writer import turns_write


@pytest.fixture
def trajectory(db):
    run = one_task_run()
    version_id = run.task_versions.values_list("pk", flat=True).get()
    return Trajectory.objects.create(
        run=run, step=0, group=0, index_in_group=0, task_version_id=version_id, reward=1.0
    )


def _row(trajectory_id, index, **over):
    row = {
        "trajectory_id": trajectory_id,
        "index": index,
        "action": "tool_calls",
        "policy_text": "<tool_call>{}</tool_call>\x00",
        "token_ids": [5, 0, 151_935],
        "logprobs": [-0.25, -1e-12, -3.5],
        "code": "",
        "observation": "E  assert 1 == 2\n" * 300 + "\x00",
        "observation_ids": list(range(1200)),
        "status": "ok",
        "result": {"tool_calls": [{"name": "bash", "output": "x\x00y"}], "tab\t": "\\u0000"},
    }
    row.update(over)
    return tuple(row.values())


@pytest.mark.django_db
def test_turns_are_written_and_read_back_exactly(trajectory):
    with transaction.atomic():
        assert turns_write(_row(trajectory.pk, i) for i in range(3)) == 3
    turns = list(Turn.objects.filter(trajectory=trajectory).order_by("index"))
    assert [t.index for t in turns] == [0, 1, 2]
    turn = turns[1]
    assert turn.token_ids == [5, 0, 151_935] and turn.logprobs == [-0.25, -1e-12, -3.5]
    assert turn.observation_token_ids == list(range(1200))
    assert turn.policy_text.endswith("\ufffd") and turn.observation.endswith("\ufffd")
    assert turn.sandbox_result == {
        "tool_calls": [{"name": "bash", "output": "x\ufffdy"}],
        "tab\t": "\\u0000",  # a backslash and "u0000" as text: kept as written
    }
    lengths = {
        t.index: (t.sampled_tokens, t.observation_tokens)
        for t in trajectory_turns(trajectory_id=trajectory.pk)
    }
    assert lengths == {0: (3, 1200), 1: (3, 1200), 2: (3, 1200)}


@pytest.mark.django_db
def test_a_bad_turn_writes_nothing_of_its_step(trajectory):
    with pytest.raises(TypeError, match="token_ids"):
        with transaction.atomic():
            turns_write([_row(trajectory.pk, 0), _row(trajectory.pk, 1, token_ids=[2**40])])
    with pytest.raises(IntegrityError):
        with transaction.atomic():
            turns_write([_row(trajectory.pk, 0), _row(trajectory.pk, 0)])
    assert not Turn.objects.exists()


@pytest.mark.django_db
def test_each_tool_output_is_stored_once_and_read_back_whole(trajectory):
    first, second = "==== 3 failed ====\n" * 200 + "E\x00", "ok\n"
    observation = f"[run_tests] {first}\n\n[bash] {second}\n\n[bash] {second}"
    calls = [
        {"name": "run_tests", "arguments": {"command": "pytest"}, "output": first},
        {"name": "bash", "output": second, "seconds": 0.5},
        {"name": "bash", "output": second, "seconds": 0.25},  # the same text again: its own
        {"name": "file_editor", "output": "not in the observation"},
        {"name": "submit", "output": ""},
    ]
    result = {"message": {"role": "assistant"}, "tool_calls": calls, "parse_errors": []}
    with transaction.atomic():
        turns_write([_row(trajectory.pk, 0, observation=observation, result=result)])
    # stored: the outputs the observation holds are offsets into it, not a second copy
    stored = Turn.objects.filter(trajectory=trajectory).values_list("sandbox_result", flat=True)
    stored_calls = stored.get()["tool_calls"]
    assert [("output" in call, call.get("output_at")) for call in stored_calls] == [
        (False, [12, 12 + len(first)]),
        (False, [len(first) + 21, len(first) + 24]),
        (False, [len(first) + 33, len(first) + 36]),
        (True, None),
        (True, None),
    ]
    # read: every call as written (the NUL replaced, as in the observation)
    turn = Turn.objects.get(trajectory=trajectory)
    expected = [dict(call) for call in calls]
    expected[0]["output"] = first.replace("\x00", "\ufffd")
    assert turn.sandbox_result == {**result, "tool_calls": expected}
