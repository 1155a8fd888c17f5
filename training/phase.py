"""The trainer's phase and sandbox demand: announced in Redis for the autoscaler, sampled for the
run page.

Rollouts need many sandboxes; the update needs none (it needs the GPU). At each phase change
every rank announces its phase and its sandbox demand per runtime (the executions it has
queued or is about to queue; :func:`sandboxes.demand.publish`, key
``crucible:sandbox:<runtime>:demand:run-<id>-rank-<r>``, TTL :data:`sandboxes.demand.PUBLISH_TTL_S`
refreshed by a background thread, so a dead trainer's demand expires by itself). The
autoscaler (:mod:`sandboxes.autoscale`) grows the pool for ``rollout`` and lets it fall back
to its floor during ``update``.

Rank 0 also samples, every :data:`SAMPLE_EVERY_S` seconds and at each phase change, the pool
as the run sees it (live slots, queue depth, in flight, demand, the autoscaler's target) and
hands each step its window (:meth:`PhaseTracker.take_step`): the phase segments and samples
stored on ``StepMetric.timeline`` (drawn on the run page as the pool chart with phase bands)
and the seconds per phase (``timing/phase_<name>_s``; under ``timing/`` with the other
wall-clock figures) added to the step's metrics.

Redis being away never stops training: a failed announcement or sample is logged and skipped.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time

import redis

from sandboxes import demand as D

log = logging.getLogger(__name__)

PHASES = ("sft", "rollout", "grading", "update", "eval", "checkpoint", "idle")
"""The phases a trainer announces (``idle``: between steps, bookkeeping, or ended)."""

SAMPLE_EVERY_S = 0.5
"""Seconds between two samples of the pool (rank 0)."""

MAX_SAMPLES_PER_STEP = 120
"""A step's timeline keeps at most this many samples (longer steps keep each bucket's peak)."""

SERIES = ("slots", "depth", "in_flight", "demand", "target")
"""The sampled series, each a count: live sandbox slots, queued requests, requests held by
workers, the larger of announced and queued demand, and the autoscaler's target in slots
(None without an autoscaler)."""


def publisher_name(run_id: int, rank: int) -> str:
    """The demand publisher of one trainer rank: ``run-<id>-rank-<r>``."""
    return f"run-{run_id}-rank-{rank}"


def downsample(
    t: list[float], series: dict[str, list], limit: int
) -> tuple[list[float], dict[str, list]]:
    """At most ``limit`` samples: consecutive samples are grouped in equal buckets, each kept as
    its last time and the peak of every series (a pool's peak is what a chart must not lose)."""
    if len(t) <= limit:
        return t, series
    size = math.ceil(len(t) / limit)
    out_t = [t[min(i + size, len(t)) - 1] for i in range(0, len(t), size)]
    out = {}
    for name, values in series.items():
        out[name] = []
        for i in range(0, len(values), size):
            chunk = [v for v in values[i : i + size] if v is not None]
            out[name].append(max(chunk) if chunk else None)
    return out_t, out


class PhaseTracker:
    """One trainer rank's phase, its announced demand, and (``sample=True``) the pool's timeline.

    Call :meth:`start` with the run's runtimes, :meth:`set` at each phase change,
    :meth:`take_step` when a step is recorded, and :meth:`close` at the end (it withdraws the
    demand). Thread-safe; times are unix seconds.
    """

    def __init__(
        self,
        *,
        run_id: int,
        rank: int = 0,
        sample: bool = True,
        sample_every_s: float = SAMPLE_EVERY_S,
        ttl_s: int = D.PUBLISH_TTL_S,
        max_samples: int = MAX_SAMPLES_PER_STEP,
    ) -> None:
        self.publisher = publisher_name(run_id, rank)
        self.sample_enabled = sample
        self.sample_every_s = sample_every_s
        self.ttl_s = ttl_s
        self.max_samples = max_samples
        self.runtimes: list[str] = []
        self.phase = "idle"
        self.demand: dict[str, int] = {}
        self.since = time.time()
        self.window_start = self.since
        self.segments: list[list] = []  # [start, end, phase] of this window, closed ones
        self.seconds: dict[str, float] = {}
        self.t: list[float] = []
        self.series: dict[str, list] = {name: [] for name in SERIES}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self._warned = False

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self, runtimes) -> PhaseTracker:
        """Begin announcing (``idle``, no demand) for ``runtimes`` and sampling in the
        background."""
        self.runtimes = sorted(set(runtimes))
        self._publish()
        if self.sample_enabled:
            self.sample()
        self.thread = threading.Thread(
            target=self._loop, name=f"phase-{self.publisher}", daemon=True
        )
        self.thread.start()
        return self

    def close(self) -> None:
        """Stop the background thread and withdraw the demand at once (no wait for the TTL)."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.phase, self.demand = "idle", {}
        try:
            D.withdraw(self.publisher, self.runtimes)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not withdraw the sandbox demand of %s: %s", self.publisher, exc)

    def _loop(self) -> None:
        refresh_every = max(0.5, self.ttl_s / 3)
        last_publish = time.monotonic()
        while not self.stopping.wait(self.sample_every_s if self.sample_enabled else refresh_every):
            if self.sample_enabled:
                self.sample()
            if time.monotonic() - last_publish >= refresh_every:
                self._publish()
                last_publish = time.monotonic()

    # --- phases and demand -------------------------------------------------------------------

    def set(self, phase: str, demand: dict[str, int] | None = None) -> None:
        """Enter ``phase`` with ``demand`` (runtime -> executions; runtimes left out: 0), announce
        it, and sample the pool at the change (rank 0). Setting the same phase again only updates
        the demand.

        Raises:
            ValueError: ``phase`` is not one of :data:`PHASES`.
        """
        if phase not in PHASES:
            raise ValueError(f"unknown trainer phase {phase!r}; one of: {', '.join(PHASES)}")
        demand = {runtime: int(count) for runtime, count in (demand or {}).items() if count}
        # Announce first, then start the phase: a pool sample taken from the phase's start on
        # (the sampler thread runs meanwhile) reads the new demand, never the previous phase's.
        self._publish(phase, demand)
        now = time.time()
        with self.lock:
            if phase != self.phase:
                self._close_segment(now)
                self.phase = phase
            self.demand = demand
        if self.sample_enabled:
            self.sample()

    def _close_segment(self, now: float) -> None:
        """End the current phase's segment at ``now`` (lock held)."""
        if now > self.since:
            self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + (now - self.since)
            if (
                self.segments
                and self.segments[-1][2] == self.phase
                and abs(self.segments[-1][1] - self.since) < 1e-6
            ):
                self.segments[-1][1] = now
            else:
                self.segments.append([self.since, now, self.phase])
        self.since = now

    def _publish(self, phase: str | None = None, demand: dict[str, int] | None = None) -> None:
        """Announce ``phase`` and ``demand`` (default: the current ones) for this tracker's
        runtimes."""
        if not self.runtimes:
            return
        phase = self.phase if phase is None else phase
        demand = self.demand if demand is None else demand
        announced = {runtime: demand.get(runtime, 0) for runtime in self.runtimes}
        try:
            D.publish(self.publisher, phase=phase, demand=announced, ttl_s=self.ttl_s)
        except (redis.RedisError, OSError) as exc:
            self._warn(f"could not announce the sandbox demand of {self.publisher}: {exc}")

    def _warn(self, message: str) -> None:
        if not self._warned:  # once per tracker: Redis away would otherwise log twice a second
            log.warning("%s (training goes on; further failures are not logged)", message)
            self._warned = True

    # --- the pool's timeline (rank 0) ----------------------------------------------------------

    def sample(self) -> None:
        """Read the pool of the run's runtimes (summed) and keep one sample."""
        # Stamped when the reading starts: a reading begun before a phase's announcement must not
        # land inside that phase.
        stamp = round(time.time(), 3)
        try:
            readings = [D.pool_signals(runtime) for runtime in self.runtimes]
        except (redis.RedisError, OSError) as exc:
            self._warn(f"could not sample the sandbox pool: {exc}")
            return
        targets = [
            r.autoscaler.get("target", 0) * r.autoscaler.get("slots_per_worker", 0)
            for r in readings
            if r.autoscaler
        ]
        values = {
            "slots": sum(r.slots for r in readings),
            "depth": sum(r.depth for r in readings),
            "in_flight": sum(r.in_flight for r in readings),
            "demand": sum(r.demand for r in readings),
            "target": sum(targets) if targets else None,
        }
        with self.lock:
            at = bisect.bisect_right(self.t, stamp)  # two readings may overlap: keep time order
            self.t.insert(at, stamp)
            for name in SERIES:
                self.series[name].insert(at, values[name])

    def take_step(self) -> tuple[dict, dict]:
        """The window since the previous call (the first: since :meth:`start`), then a new window.

        Returns:
            ``(metrics, timeline)``. ``metrics``: ``timing/phase_<name>_s``, the seconds spent in
            each phase of the window. ``timeline``: ``{"start",
            "end"`` (unix s), ``"phases": [[start, end, phase], ...]``, ``"t": [unix s, ...]`` and
            one list per :data:`SERIES` name, at most ``max_samples`` long}``.
        """
        now = time.time()
        with self.lock:
            self._close_segment(now)
            segments, seconds = self.segments, self.seconds
            t, series = self.t, self.series
            start = self.window_start
            self.segments, self.seconds, self.window_start = [], {}, now
            self.t, self.series = [], {name: [] for name in SERIES}
        metrics = {
            f"timing/phase_{name}_s": round(value, 3) for name, value in sorted(seconds.items())
        }
        t, series = downsample(t, series, self.max_samples)
        # Times to the millisecond: a phase shorter than that (announced and left at once) keeps
        # its place with a start equal to its end.
        timeline = {
            "start": round(start, 3),
            "end": round(now, 3),
            "phases": [[round(a, 3), round(b, 3), phase] for a, b, phase in segments],
            "t": t,
            **series,
        }
        return metrics, timeline
