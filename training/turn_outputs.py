"""A tool call's output, stored once.

An agent turn's ``observation`` is the text the policy saw after the turn: each call's output in
order (``[name] output`` blocks, ``training.agents.trajectory.AgentTurn.observation``), and its
``sandbox_result["tool_calls"]`` lists the same calls for the console, each with its output
again. Kilobytes of pytest output a turn, thousands of turns a step: stored twice, they were
half of what a step wrote. :func:`outputs_referenced` (the writer, ``training.turn_writer``)
replaces each call's ``output`` that the observation holds verbatim by ``output_at``, its
``[start, end)`` code-point offsets in the observation; :func:`outputs_restored` (the reader,
``training.models.Turn.from_db``) puts the text back, so every reader sees the call as it was.
An output the observation does not hold (a ``run_code`` result, an empty output) stays inline.
"""

from __future__ import annotations

OUTPUT_AT = "output_at"


def outputs_referenced(result, observation: str):
    """``result`` with each tool call's ``output`` found in ``observation`` (in call order,
    from after the previous call's) replaced by ``output_at: [start, end]``; ``result`` itself is
    not changed. Anything else (no ``tool_calls`` list, an output not found) is kept as it is."""
    calls = result.get("tool_calls") if isinstance(result, dict) else None
    if not isinstance(calls, list) or not observation:
        return result
    stored, cursor = [], 0
    for call in calls:
        output = call.get("output") if isinstance(call, dict) else None
        start = observation.find(output, cursor) if isinstance(output, str) and output else -1
        if start < 0:
            stored.append(call)
            continue
        cursor = start + len(output)
        reference = {key: value for key, value in call.items() if key != "output"}
        reference[OUTPUT_AT] = [start, cursor]
        stored.append(reference)
    return {**result, "tool_calls": stored}


def outputs_restored(result, observation: str):
    """The inverse of :func:`outputs_referenced`: each ``output_at`` replaced by the text it
    points at (an ``output_at`` outside ``observation`` restores as ``""``, never raises)."""
    calls = result.get("tool_calls") if isinstance(result, dict) else None
    if not isinstance(calls, list) or not any(
        isinstance(call, dict) and OUTPUT_AT in call for call in calls
    ):
        return result
    restored = []
    for call in calls:
        at = call.get(OUTPUT_AT) if isinstance(call, dict) else None
        if not (isinstance(at, list) and len(at) == 2 and all(isinstance(i, int) for i in at)):
            restored.append(call)
            continue
        start, end = at
        text = observation[start:end] if 0 <= start <= end <= len(observation) else ""
        restored.append(
            {**{key: value for key, value in call.items() if key != OUTPUT_AT}, "output": text}
        )
    return {**result, "tool_calls": restored}
