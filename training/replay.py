"""A trajectory's turns as the replay draws them: the table of contents and the first chunk a
page embeds, and the wire form of a chunk the replay's script reads from the JSON API.

Shared by the trajectory page (:mod:`console.replay_views`) and the review's labelling page
(:mod:`console.review.views`), which shows the same replay beside its label buttons. A turn is
plain data (``TurnSerializer``); the page's script (``frontend/console/replay.js``) draws each kind
of data it finds in a turn with a block of its own, so a turn that carries more (messages, tool
calls and their outputs, workspace diffs) needs a field here and a block there.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from training import selectors
from training.models import Trajectory, Turn

AGENT_ACTION = "tool_calls"  # Turn.action of an agent's turn (training/agents/)
TURN_CHUNK = 25
"""Turns per chunk: the first is embedded in the page, the rest read as they scroll into view."""


class TurnSerializer(serializers.ModelSerializer):
    """One turn as the replay draws it; ``diff`` is the unified diff of ``code`` from the
    previous turn's code as ``[kind, line]`` pairs (kind: head, hunk, add, del, ctx)."""

    sampled_tokens = serializers.IntegerField(allow_null=True)
    observation_tokens = serializers.IntegerField(allow_null=True)
    diff = serializers.SerializerMethodField()

    class Meta:
        model = Turn
        fields = [
            "id",
            "index",
            "action",
            "policy_text",
            "code",
            "diff",
            "observation",
            "sandbox_status",
            "sandbox_result",
            "sampled_tokens",
            "observation_tokens",
        ]

    @extend_schema_field(
        serializers.ListField(child=serializers.ListField(child=serializers.CharField()))
    )
    def get_diff(self, turn: Turn) -> list:
        if turn.action == AGENT_ACTION:  # an agent's turn holds the workspace's diff itself
            return unified_diff_rows(turn.code)
        before = self.context.get("code_before", {})
        if turn.pk not in before:
            return []
        return [list(pair) for pair in selectors.code_diff(old=before[turn.pk], new=turn.code)]


def unified_diff_rows(text: str) -> list[list[str]]:
    """A unified diff's lines as ``[kind, line]`` pairs (kind: head, hunk, add, del, ctx)."""
    rows = []
    for line in text.splitlines():
        if line.startswith(("--- ", "+++ ", "diff ", "Binary ")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        rows.append([kind, line])
    return rows


def turn_chunk(
    turns: list[Turn], *, trajectory_id: int, offset: int, context: dict | None = None
) -> list[dict]:
    """Serialize consecutive turns starting at position ``offset``, each diffed against the one
    before (the first turn of a trajectory has no diff)."""
    code_before = {}
    previous = (
        selectors.turn_code_before(trajectory_id=trajectory_id, offset=offset)
        if offset > 0 and turns
        else None
    )
    for turn in turns:
        if previous is not None:
            code_before[turn.pk] = previous
        previous = turn.code
    return TurnSerializer(
        turns, many=True, context={**(context or {}), "code_before": code_before}
    ).data


def replay_turns(*, trajectory: Trajectory) -> dict:
    """What a page needs to replay ``trajectory``: ``turns`` (one ``{"number", "index",
    "action", "status"}`` per turn, the index) and ``first_chunk`` (``{"offset", "count",
    "chunk", "results"}``: the first :data:`TURN_CHUNK` turns serialized, for ``json_script``)."""
    index = selectors.trajectory_turn_index(trajectory_id=trajectory.pk)
    first = list(selectors.trajectory_turns(trajectory_id=trajectory.pk)[:TURN_CHUNK])
    return {
        "turns": [
            {"number": n + 1, "index": i, "action": a, "status": s}
            for n, (i, a, s) in enumerate(index)
        ],
        "first_chunk": {
            "offset": 0,
            "count": len(index),
            "chunk": TURN_CHUNK,
            "results": turn_chunk(first, trajectory_id=trajectory.pk, offset=0),
        },
    }
