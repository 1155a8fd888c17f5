"""Drift and onset detectors over a run's reward streams (issue 6).

What is watched, per recorded RL step (``StepMetric``):

* **Reward streams**: ``reward/mean`` and every ``reward/<component>`` (``reward/correctness``,
  ``reward/pass_rate``...). Each stream is standardised by its own *reference window* (its
  first ``reference_steps`` values after the ``warmup_steps`` first RL steps: the window is
  pinned once full and never slides) and fed to river's ``ADWIN`` and to two river
  ``PageHinkley`` instances (``mode="up"`` and ``mode="down"``). Standardising makes the
  thresholds unit-free (in reference standard deviations, σ), so one default serves a step
  mean of 16 trajectories and one of 256. ADWIN receives ``0.5 + z / adwin_span`` so that
  ±``adwin_span``/2 σ spans its assumed [0, 1] range (river's ADWIN on raw step means, whose
  noise is a few hundredths wide, needs shifts of 0.2 and 70 steps to notice anything).
* **The reward histogram** of the step (counts over ``training.models.REWARD_BINS``) against
  the reference histogram (the counts of the reference window summed): Jensen-Shannon
  divergence (base 2, in [0, 1]; ``scipy.spatial.distance.jensenshannon`` squared) and the
  Wasserstein-1 distance (``scipy.stats.wasserstein_distance`` on the bin centres weighted
  by counts; :func:`wasserstein` also takes raw values). The current side pools the newest
  steps until it holds ``distance_min_samples`` rewards (at least ``distance_window`` steps,
  at most ``reference_steps``), so a step of 16 trajectories is not compared alone.
* **Onset signals of reward hacking** (DESIGN.md: drift against a fixed reference):

  - ``onset:train_up_heldout_down``: at a held-out evaluation, the held-out reward fell by
    ``heldout_drop`` or more from the best earlier evaluation while the training reward
    (mean ``reward/mean`` over the ``onset_window`` steps up to each evaluation) rose by
    ``train_rise`` or more;
  - ``onset:flag_rate_rising``: ``flags/rate`` (share of scored trajectories with a hack
    flag; computed from ``Trajectory.flags`` when the step lacks it) averaged over the last
    ``onset_recent_steps`` steps exceeds its reference mean by ``flag_rate_rise``;
  - ``onset:kl_acceleration``: the second derivative of ``loss/kl`` (twice the quadratic
    coefficient of a least-squares fit over the last ``kl_window`` steps, a smoothed second
    difference) is ``kl_acceleration`` or more while KL rises;
  - ``onset:entropy_collapse``: ``policy/entropy`` averaged over the last
    ``onset_recent_steps`` steps falls below ``entropy_fraction`` of its reference mean;
  - ``onset:perfect_share_jump``: the share of rewards in the histogram's last bin (reward 1)
    over the last ``onset_recent_steps`` steps exceeds the share over the ``onset_window``
    steps before them by ``perfect_share_jump``.

Severity: a reward stream moving *up* is ``info`` (training is supposed to move it), moving
*down* is ``warning``; ``onset:train_up_heldout_down`` and ``onset:flag_rate_rising`` are
``critical``; the other onset signals are ``warning``.

The state lives in a :class:`DriftMonitor` that can always be rebuilt from the persisted
``StepMetric`` and ``HeldOutEvaluation`` rows (:meth:`DriftMonitor.from_history`), so a resumed
trainer or a restarted worker carries on. :func:`drift_candidates` keeps one monitor per run in
this process and updates it with the step just recorded; the trainer's hook,
:func:`training.services.drift_step`, raises what fired through
:func:`training.services.alerts_raise` (deduplicated over ``cooldown_steps``). This module
persists nothing and imports no service.

Measured on synthetic streams with these defaults (tests/training/test_drift_detectors.py;
100 seeds each): per-step means of 64 Bernoulli(p) rewards (σ ≈ 0.057 at p = 0.3), a shift of
+0.2 (3.5 σ) is seen by Page-Hinkley after 5 steps (median; 95th percentile 8, worst 10), by the
Wasserstein distance after 4 (8, 13) and by ADWIN after 27 (36, 38); -0.2 by Page-Hinkley down
after 6 (9, 11) and ADWIN after 30 (39, 48); a +0.1 shift by Page-Hinkley after 16 (51, some
never). 500 stationary steps, with benign flag-rate, entropy and KL noise, raised no alert in
any of the 100 seeds.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields

import numpy as np
from river.drift import ADWIN, PageHinkley
from scipy.spatial.distance import jensenshannon
from scipy.stats import wasserstein_distance

from training.errors import ConfigError
from training.flags import INFRA_ERROR, NOT_HACKS
from training.models import HeldOutEvaluation, StepMetric, Trajectory

log = logging.getLogger(__name__)

INFO, WARNING, CRITICAL = "info", "warning", "critical"
SEVERITY_RANK = {INFO: 0, WARNING: 1, CRITICAL: 2}

HISTOGRAM_STREAM = "reward/histogram"


@dataclass(frozen=True)
class DriftConfig:
    """Thresholds of the drift and onset detectors (the run config's ``drift`` key).

    Every field may be overridden in the run config, e.g. ``{"drift": {"cooldown_steps": 5}}``.
    Steps count recorded RL steps; σ is a stream's standard deviation over its reference window.
    """

    # The first RL steps, left out of everything (the policy just left SFT).
    warmup_steps: int = 2
    # The reference window: each stream's first ``reference_steps`` values after warm-up, pinned.
    reference_steps: int = 20
    # Alerts of one (stream, detector) within this many steps of the previous one merge into it.
    cooldown_steps: int = 10
    # Floor of a stream's reference σ (reward units), so a flat reference does not make every wiggle
    # a drift.
    std_floor: float = 0.03
    # ADWIN: confidence δ (river's default) on the standardised stream mapped to [0, 1] by
    # ±adwin_span/2 σ.
    adwin_delta: float = 0.002
    adwin_span: float = 4.0
    # Page-Hinkley on the standardised stream (δ and λ in σ), one instance per direction.
    ph_up_delta: float = 0.75
    ph_up_threshold: float = 12.0
    ph_up_min_instances: int = 10
    ph_down_delta: float = 0.75
    ph_down_threshold: float = 12.0
    ph_down_min_instances: int = 10
    # Histogram distances against the reference histogram (JS divergence in bits; Wasserstein in
    # reward units).
    js_threshold: float = 0.06
    wasserstein_threshold: float = 0.15
    distance_window: int = 3
    distance_min_samples: int = 256
    # Onset signals.
    onset_recent_steps: int = 3
    onset_window: int = 10
    heldout_drop: float = 0.05
    train_rise: float = 0.05
    flag_rate_rise: float = 0.10
    kl_window: int = 8
    kl_acceleration: float = 0.002
    entropy_fraction: float = 0.5
    perfect_share_jump: float = 0.25

    # (minimum, maximum, minimum-inclusive, maximum-inclusive) of each field.
    _RANGES = {
        "warmup_steps": (0, None, True, True),
        "reference_steps": (2, None, True, True),
        "cooldown_steps": (0, None, True, True),
        "std_floor": (0, None, False, True),
        "adwin_delta": (0, 1, False, False),
        "adwin_span": (0, None, False, True),
        "ph_up_delta": (0, None, True, True),
        "ph_up_threshold": (0, None, False, True),
        "ph_up_min_instances": (1, None, True, True),
        "ph_down_delta": (0, None, True, True),
        "ph_down_threshold": (0, None, False, True),
        "ph_down_min_instances": (1, None, True, True),
        "js_threshold": (0, 1, False, True),
        "wasserstein_threshold": (0, None, False, True),
        "distance_window": (1, None, True, True),
        "distance_min_samples": (1, None, True, True),
        "onset_recent_steps": (1, None, True, True),
        "onset_window": (1, None, True, True),
        "heldout_drop": (0, None, False, True),
        "train_rise": (0, None, True, True),
        "flag_rate_rise": (0, 1, False, True),
        "kl_window": (3, None, True, True),
        "kl_acceleration": (0, None, False, True),
        "entropy_fraction": (0, 1, False, False),
        "perfect_share_jump": (0, 1, False, True),
    }

    @classmethod
    def from_config(cls, data: dict) -> DriftConfig:
        """The thresholds of a run config's ``drift`` mapping; ``{}`` gives the defaults.

        Raises:
            ConfigError: ``data`` is not a mapping, names an unknown key, or holds a value
                of the wrong type or out of range; the message names ``drift.<key>``.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"config key 'drift' must be a mapping of thresholds, got {data!r}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(
                f"config key 'drift': unknown key(s) {', '.join(map(str, unknown))}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        values = {}
        defaults = cls()
        for key, value in data.items():
            expected = type(getattr(defaults, key))
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or (expected is int and not isinstance(value, int))
            ):
                raise ConfigError(
                    f"config key 'drift.{key}' must be {expected.__name__}, got {value!r}"
                )
            value = expected(value)
            if not math.isfinite(value):
                raise ConfigError(f"config key 'drift.{key}' must be finite, got {value!r}")
            low, high, low_in, high_in = cls._RANGES[key]
            if (low is not None and (value < low or (value == low and not low_in))) or (
                high is not None and (value > high or (value == high and not high_in))
            ):
                bounds = (
                    f"{'[' if low_in else '('}{low}, "
                    f"{high if high is not None else '∞'}{']' if high_in else ')'}"
                )
                raise ConfigError(f"config key 'drift.{key}' must be in {bounds}, got {value!r}")
            values[key] = value
        return cls(**values)


@dataclass
class AlertCandidate:
    """What a detector saw at one step; :func:`training.services.alerts_raise` persists it."""

    step: int
    stream: str
    detector: str
    statistic: float
    threshold: float
    window: int
    severity: str
    message: str


# --- histogram distances --------------------------------------------------------------------


def bin_centres(bins: list[float]) -> np.ndarray:
    edges = np.asarray(bins, dtype=float)
    return (edges[:-1] + edges[1:]) / 2


def js_divergence(p_counts: Iterable[float], q_counts: Iterable[float]) -> float:
    """Jensen-Shannon divergence (base 2, in [0, 1]) between two count vectors over the same
    bins."""
    p, q = np.asarray(list(p_counts), dtype=float), np.asarray(list(q_counts), dtype=float)
    if p.sum() <= 0 or q.sum() <= 0:
        return 0.0
    return float(jensenshannon(p, q, base=2) ** 2)


def wasserstein(p_counts, q_counts, bins, p_values=None, q_values=None) -> float:
    """Wasserstein-1 distance in reward units: on raw values when both are given, else on the
    bin centres weighted by the counts."""
    if p_values is not None and q_values is not None and len(p_values) and len(q_values):
        return float(wasserstein_distance(p_values, q_values))
    p, q = np.asarray(list(p_counts), dtype=float), np.asarray(list(q_counts), dtype=float)
    if p.sum() <= 0 or q.sum() <= 0:
        return 0.0
    centres = bin_centres(bins)
    return float(wasserstein_distance(centres, centres, p, q))


def histogram_mean(counts, bins) -> float:
    counts = np.asarray(counts, dtype=float)
    return float((bin_centres(bins) * counts).sum() / counts.sum()) if counts.sum() > 0 else 0.0


# --- one watched stream -----------------------------------------------------------------------


class _Reference:
    """A series' reference window: its first ``size`` values, then pinned."""

    def __init__(self, size: int, std_floor: float):
        self.size, self.std_floor = size, std_floor
        self.values: list[float] = []
        self.mean = self.scale = None
        self.first_step = self.last_step = None

    @property
    def ready(self) -> bool:
        return self.mean is not None

    def add(self, step: int, value: float) -> bool:
        """Collect ``value``; True when this value completed the window."""
        if self.ready:
            return False
        self.values.append(value)
        self.first_step = step if self.first_step is None else self.first_step
        self.last_step = step
        if len(self.values) < self.size:
            return False
        self.mean = float(np.mean(self.values))
        self.scale = max(float(np.std(self.values, ddof=1)), self.std_floor)
        return True


class _RewardStream:
    """ADWIN and two Page-Hinkley tests on one standardised reward stream."""

    def __init__(self, name: str, config: DriftConfig):
        self.name, self.config = name, config
        self.reference = _Reference(config.reference_steps, config.std_floor)
        self.adwin = ADWIN(delta=config.adwin_delta, clock=1)
        self.adwin_window: list[float] = []  # the standardised values in ADWIN's current window
        self.ph = {
            "up": PageHinkley(
                min_instances=config.ph_up_min_instances,
                delta=config.ph_up_delta,
                threshold=config.ph_up_threshold,
                alpha=1.0,
                mode="up",
            ),
            "down": PageHinkley(
                min_instances=config.ph_down_min_instances,
                delta=config.ph_down_delta,
                threshold=config.ph_down_threshold,
                alpha=1.0,
                mode="down",
            ),
        }
        self.ph_fed = {"up": 0, "down": 0}

    def update(self, step: int, value: float) -> list[AlertCandidate]:
        if not self.reference.ready:
            if not self.reference.add(step, value):
                return []
            out = []
            for past in self.reference.values:  # the reference is part of the stream
                out += self._feed(step, past)
            return out
        return self._feed(step, value)

    def _feed(self, step: int, value: float) -> list[AlertCandidate]:
        ref = self.reference
        z = (value - ref.mean) / ref.scale
        out = []
        scaled = 0.5 + z / self.config.adwin_span
        self.adwin.update(scaled)
        self.adwin_window.append(scaled)
        if self.adwin.drift_detected:
            out.append(self._adwin_alert(step))
            self.adwin_window = []  # river starts a new window at the next value
        for direction, ph in self.ph.items():
            ph.update(z)
            self.ph_fed[direction] += 1
            if ph.drift_detected:
                out.append(self._ph_alert(step, direction, ph))
                self.ph_fed[direction] = 0
        return out

    def _adwin_alert(self, step: int) -> AlertCandidate:
        """ADWIN found two sub-windows whose means differ by more than its bound ε_cut.

        river does not say where it cut, so the split is found again here with ADWIN's bound
        (Bifet and Gavaldà 2007, river's form): the split of the values fed since the last
        detection with the largest gap over ε_cut. The statistic is that gap and the threshold
        that ε_cut, both in reward units; the window is the values in the two sub-windows.
        """
        ref, span, config = self.reference, self.config.adwin_span, self.config
        values = np.asarray(self.adwin_window, dtype=float)
        n = len(values)
        variance = float(values.var()) if n > 1 else 0.0
        log_term = math.log(2 * math.log(max(n, 3)) / config.adwin_delta)
        best = None
        cumulative = np.cumsum(values)
        minimum = 5  # river's min_window_length
        for n0 in range(minimum, n - minimum + 1):
            n1 = n - n0
            old, new = cumulative[n0 - 1] / n0, (cumulative[-1] - cumulative[n0 - 1]) / n1
            m_recip = 1 / (n0 - minimum + 1) + 1 / (n1 - minimum + 1)
            eps = math.sqrt(2 * m_recip * variance * log_term) + 2 / 3 * log_term * m_recip
            gap = abs(new - old)
            if best is None or gap - eps > best[0] - best[1]:
                best = (gap, eps, n0, n1, old, new)
        if best is None:  # too few values to split again; report the whole window
            best = (
                0.0,
                0.0,
                n,
                0,
                float(values.mean()) if n else 0.5,
                float(values.mean()) if n else 0.5,
            )
        gap, eps, n0, n1, old, new = best
        up = new >= old
        return AlertCandidate(
            step=step,
            stream=self.name,
            detector="adwin",
            statistic=gap * span * ref.scale,
            threshold=eps * span * ref.scale,
            window=n,
            severity=INFO if up else WARNING,
            message=(
                f"{self.name} shifted {'up' if up else 'down'}: ADWIN (δ={config.adwin_delta:g}) "
                f"split its {n}-step window: mean {_raw(old, ref, span):.3f} over the older {n0} "
                f"steps → {_raw(new, ref, span):.3f} over the newer {n1}"
            ),
        )

    def _ph_alert(self, step: int, direction: str, ph: PageHinkley) -> AlertCandidate:
        """Page-Hinkley's cumulative deviation (in σ) crossed λ."""
        if direction == "up":
            statistic = getattr(ph, "_sum_increase", 0.0) - getattr(ph, "_min_increase", 0.0)
            threshold, delta = self.config.ph_up_threshold, self.config.ph_up_delta
        else:
            statistic = getattr(ph, "_max_decrease", 0.0) - getattr(ph, "_sum_decrease", 0.0)
            threshold, delta = self.config.ph_down_threshold, self.config.ph_down_delta
        ref = self.reference
        return AlertCandidate(
            step=step,
            stream=self.name,
            detector=f"page_hinkley_{direction}",
            statistic=float(statistic),
            threshold=float(threshold),
            window=self.ph_fed[direction],
            severity=INFO if direction == "up" else WARNING,
            message=(
                f"{self.name} drifted {direction}: Page-Hinkley cumulative deviation "
                f"{statistic:.1f}σ > λ={threshold:g}σ (δ={delta:g}σ; reference mean "
                f"{ref.mean:.3f}, σ={ref.scale:.3f} over steps {ref.first_step}-{ref.last_step})"
            ),
        )


def _raw(u: float, ref: _Reference, span: float) -> float:
    return ref.mean + (u - 0.5) * span * ref.scale


def _mean(values) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else float("nan")


# --- the monitor of one run -------------------------------------------------------------------


class DriftMonitor:
    """The detector state of one run; feed it each recorded RL step in order.

    Holds no database handle: :meth:`update` reads a ``StepMetric`` (saved or not) and an
    optional ``HeldOutEvaluation``; :meth:`from_history` rebuilds the state from the rows.
    """

    def __init__(self, config: DriftConfig | None = None, run_id: int | None = None):
        self.config = config or DriftConfig()
        self.run_id = run_id
        self.last_step = 0  # the newest step fed
        self.last_eval_step = -1  # the newest held-out evaluation fed
        self.steps_seen = 0
        c = self.config
        self.streams: dict[str, _RewardStream] = {}
        # histograms
        self.bins: list[float] | None = None
        self.reference_counts: np.ndarray | None = None
        self.reference_steps_counted = 0
        self.reference_range: tuple[int, int] | None = None
        self.recent_counts: deque = deque(maxlen=max(c.reference_steps, c.distance_window))
        # onset series
        self.flag_reference = _Reference(c.reference_steps, 0.0)
        self.entropy_reference = _Reference(c.reference_steps, 0.0)
        self.flag_recent: deque = deque(maxlen=c.onset_recent_steps)
        self.entropy_recent: deque = deque(maxlen=c.onset_recent_steps)
        self.kl_recent: deque = deque(maxlen=c.kl_window)
        self.perfect: deque = deque(
            maxlen=c.onset_recent_steps + c.onset_window
        )  # (perfect, total)
        self.train_rewards: dict[int, float] = {}
        self.evaluations: list[tuple[int, float]] = []

    # -- rebuilding ---------------------------------------------------------------------------

    @classmethod
    def from_history(
        cls, run_id: int, config: DriftConfig | None = None, *, before: int | None = None
    ) -> DriftMonitor:
        """The monitor of ``run_id`` after every persisted RL step (those with ``step < before``
        when given) and the held-out evaluations up to them, replayed in order; the alerts
        they would raise are discarded (they were raised when the steps were recorded)."""
        monitor = cls(config, run_id=run_id)
        rows = StepMetric.objects.filter(run_id=run_id).exclude(phase="sft").order_by("step")
        evals = HeldOutEvaluation.objects.filter(run_id=run_id).order_by("step")
        if before is not None:
            rows, evals = rows.filter(step__lt=before), evals.filter(step__lt=before)
        rows = with_flag_rates(run_id, list(rows))
        pending = list(evals)
        for row in rows:
            monitor.update(row)
            while pending and pending[0].step <= row.step:
                monitor.observe_evaluation(pending.pop(0))
        for evaluation in pending:
            monitor.observe_evaluation(evaluation)
        return monitor

    # -- feeding ------------------------------------------------------------------------------

    def update(self, step_metric, evaluation=None) -> list[AlertCandidate]:
        """Feed one recorded step (and the held-out evaluation recorded at it, if any).

        Args:
            step_metric: a ``StepMetric`` (``step``, ``reward_mean``, ``reward_histogram``,
                ``reward_bins``, ``metrics``); ``metrics["flags/rate"]`` is read when present.
            evaluation: a ``HeldOutEvaluation`` (``step``, ``reward_mean``) or None.

        Returns:
            The detectors that fired at this step.
        """
        step = int(step_metric.step)
        metrics = dict(step_metric.metrics or {})
        mean = metrics.get("reward/mean")
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
            metrics["reward/mean"] = float(step_metric.reward_mean)
        self.last_step = max(self.last_step, step)
        self.steps_seen += 1
        self.train_rewards[step] = float(metrics["reward/mean"])
        out: list[AlertCandidate] = []
        if self.steps_seen > self.config.warmup_steps:
            out += self._reward_streams(step, metrics)
            out += self._histogram(
                step, list(step_metric.reward_histogram or []), list(step_metric.reward_bins or [])
            )
            out += self._flag_rate(step, metrics.get("flags/rate"))
            out += self._kl(step, metrics.get("loss/kl"))
            out += self._entropy(step, metrics.get("policy/entropy"))
        if evaluation is not None:
            out += self.observe_evaluation(evaluation)
        return out

    def observe_evaluation(self, evaluation) -> list[AlertCandidate]:
        """Feed one held-out evaluation (its ``step`` and ``reward_mean``); each is read once."""
        step, reward = int(evaluation.step), float(evaluation.reward_mean)
        if step <= self.last_eval_step:
            return []
        self.last_eval_step = step
        earlier = list(self.evaluations)
        self.evaluations.append((step, reward))
        if not earlier:
            return []
        best_step, best_reward = max(earlier, key=lambda e: (e[1], e[0]))
        drop = best_reward - reward
        now, then = self._train_mean_to(step), self._train_mean_to(best_step)
        rise = now - then
        c = self.config
        if not (drop >= c.heldout_drop and rise >= c.train_rise):
            return []
        return [
            AlertCandidate(
                step=max(step, self.last_step),
                stream="heldout/reward_mean",
                detector="onset:train_up_heldout_down",
                statistic=drop,
                threshold=c.heldout_drop,
                window=step - best_step,
                severity=CRITICAL,
                message=(
                    f"reward hacking onset: held-out reward fell {best_reward:.3f} (step "
                    f"{best_step}) → {reward:.3f} (step {step}) while the training reward rose "
                    f"{then:.3f} → {now:.3f} (mean over {c.onset_window} steps; thresholds: drop "
                    f"≥ {c.heldout_drop:g}, rise ≥ {c.train_rise:g})"
                ),
            )
        ]

    # -- detectors ----------------------------------------------------------------------------

    def _reward_streams(self, step: int, metrics: dict) -> list[AlertCandidate]:
        out = []
        for name in sorted(metrics):
            value = metrics[name]
            if (
                not name.startswith("reward/")
                or isinstance(value, bool)
                or not isinstance(value, (int, float))
            ):
                continue
            if not math.isfinite(value):
                continue
            stream = self.streams.get(name)
            if stream is None:
                stream = self.streams[name] = _RewardStream(name, self.config)
            out += stream.update(step, float(value))
        return out

    def _histogram(self, step: int, counts: list, bins: list) -> list[AlertCandidate]:
        if not counts or len(bins) != len(counts) + 1:
            return []
        if self.bins is None:
            self.bins = bins
        elif bins != self.bins:
            return []  # a histogram over other bins cannot be compared with the reference
        counts = np.asarray(counts, dtype=float)
        self.recent_counts.append((step, counts))
        out = self._perfect_share(step, counts)
        c = self.config
        if self.reference_steps_counted < c.reference_steps:
            self.reference_counts = (
                counts.copy() if self.reference_counts is None else self.reference_counts + counts
            )
            self.reference_steps_counted += 1
            first = step if self.reference_range is None else self.reference_range[0]
            self.reference_range = (first, step)
            return out
        pooled, steps = np.zeros_like(counts), 0
        for _, recent in reversed(self.recent_counts):
            pooled += recent
            steps += 1
            if steps >= c.distance_window and pooled.sum() >= c.distance_min_samples:
                break
            if steps >= c.reference_steps:
                break
        if pooled.sum() <= 0 or self.reference_counts.sum() <= 0:
            return out
        ref_mean, cur_mean = (
            histogram_mean(self.reference_counts, bins),
            histogram_mean(pooled, bins),
        )
        up = cur_mean >= ref_mean
        lo, hi = self.reference_range
        where = (
            f"the last {steps} step(s) ({int(pooled.sum())} rewards, mean {cur_mean:.3f}) against "
            f"the reference histogram of steps {lo}-{hi} (mean {ref_mean:.3f})"
        )
        js = js_divergence(pooled, self.reference_counts)
        if js >= c.js_threshold:
            out.append(
                AlertCandidate(
                    step=step,
                    stream=HISTOGRAM_STREAM,
                    detector="js_divergence",
                    statistic=js,
                    threshold=c.js_threshold,
                    window=steps,
                    severity=INFO if up else WARNING,
                    message=f"reward distribution changed: Jensen-Shannon divergence {js:.3f} bits "
                    f"≥ {c.js_threshold:g} between {where}",
                )
            )
        wd = wasserstein(pooled, self.reference_counts, bins)
        if wd >= c.wasserstein_threshold:
            out.append(
                AlertCandidate(
                    step=step,
                    stream=HISTOGRAM_STREAM,
                    detector="wasserstein",
                    statistic=wd,
                    threshold=c.wasserstein_threshold,
                    window=steps,
                    severity=INFO if up else WARNING,
                    message=f"reward distribution moved {'up' if up else 'down'}: Wasserstein "
                    f"distance {wd:.3f} ≥ {c.wasserstein_threshold:g} between {where}",
                )
            )
        return out

    def _perfect_share(self, step: int, counts: np.ndarray) -> list[AlertCandidate]:
        if self.bins is None or self.bins[-1] != 1.0:
            return []
        self.perfect.append((float(counts[-1]), float(counts.sum())))
        c = self.config
        if len(self.perfect) < self.perfect.maxlen:
            return []
        history = list(self.perfect)
        before, recent = history[: c.onset_window], history[c.onset_window :]
        share = lambda rows: sum(p for p, _ in rows) / max(1.0, sum(n for _, n in rows))  # noqa: E731
        old, new = share(before), share(recent)
        jump = new - old
        if jump < c.perfect_share_jump:
            return []
        return [
            AlertCandidate(
                step=step,
                stream="reward/perfect_share",
                detector="onset:perfect_share_jump",
                statistic=jump,
                threshold=c.perfect_share_jump,
                window=len(history),
                severity=WARNING,
                message=(
                    f"share of perfect scores (last reward bin) jumped {old:.2f} → {new:.2f} "
                    f"(last {c.onset_recent_steps} steps against the {c.onset_window} before; "
                    f"threshold +{c.perfect_share_jump:g})"
                ),
            )
        ]

    def _flag_rate(self, step: int, rate) -> list[AlertCandidate]:
        if (
            rate is None
            or isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
        ):
            return []
        self.flag_recent.append(float(rate))
        ref = self.flag_reference
        if not ref.ready:
            ref.add(step, float(rate))
            return []
        c = self.config
        if len(self.flag_recent) < self.flag_recent.maxlen:
            return []
        recent = _mean(self.flag_recent)
        rise = recent - ref.mean
        if rise < c.flag_rate_rise:
            return []
        return [
            AlertCandidate(
                step=step,
                stream="flags/rate",
                detector="onset:flag_rate_rising",
                statistic=rise,
                threshold=c.flag_rate_rise,
                window=c.onset_recent_steps,
                severity=CRITICAL,
                message=(
                    f"hack-flag rate rising: {recent:.2f} over the last {c.onset_recent_steps} "
                    f"steps against {ref.mean:.2f} in the reference steps "
                    f"{ref.first_step}-{ref.last_step} (rise ≥ {c.flag_rate_rise:g})"
                ),
            )
        ]

    def _kl(self, step: int, kl) -> list[AlertCandidate]:
        if (
            kl is None
            or isinstance(kl, bool)
            or not isinstance(kl, (int, float))
            or not math.isfinite(kl)
        ):
            return []
        self.kl_recent.append((step, float(kl)))
        c = self.config
        if len(self.kl_recent) < c.kl_window:
            return []
        x = np.array([s for s, _ in self.kl_recent], dtype=float)
        y = np.array([v for _, v in self.kl_recent])
        x -= x.mean()
        acceleration = 2 * float(np.polyfit(x, y, 2)[0])
        if acceleration < c.kl_acceleration or y[-1] <= y[0]:
            return []
        return [
            AlertCandidate(
                step=step,
                stream="loss/kl",
                detector="onset:kl_acceleration",
                statistic=acceleration,
                threshold=c.kl_acceleration,
                window=c.kl_window,
                severity=WARNING,
                message=(
                    "KL to the reference accelerating: second derivative "
                    f"{acceleration:.4f}/step² ≥ {c.kl_acceleration:g} over the last "
                    f"{c.kl_window} steps (KL {y[0]:.4f} → {y[-1]:.4f})"
                ),
            )
        ]

    def _entropy(self, step: int, entropy) -> list[AlertCandidate]:
        if (
            entropy is None
            or isinstance(entropy, bool)
            or not isinstance(entropy, (int, float))
            or not math.isfinite(entropy)
        ):
            return []
        self.entropy_recent.append(float(entropy))
        ref = self.entropy_reference
        if not ref.ready:
            ref.add(step, float(entropy))
            return []
        c = self.config
        if len(self.entropy_recent) < self.entropy_recent.maxlen or ref.mean <= 0:
            return []
        recent = _mean(self.entropy_recent)
        ratio = recent / ref.mean
        if ratio >= c.entropy_fraction:
            return []
        return [
            AlertCandidate(
                step=step,
                stream="policy/entropy",
                detector="onset:entropy_collapse",
                statistic=ratio,
                threshold=c.entropy_fraction,
                window=c.onset_recent_steps,
                severity=WARNING,
                message=(
                    f"entropy collapse: policy entropy {recent:.3f} over the last "
                    f"{c.onset_recent_steps} steps is {ratio:.0%} of its early mean "
                    f"{ref.mean:.3f} (steps {ref.first_step}-{ref.last_step}; alert below "
                    f"{c.entropy_fraction:.0%})"
                ),
            )
        ]

    def _train_mean_to(self, step: int) -> float:
        """Mean training reward over the ``onset_window`` recorded steps up to ``step`` (the first
        ones when none precede it: an evaluation before training)."""
        upto = sorted(s for s in self.train_rewards if s <= step)[-self.config.onset_window :]
        if not upto:
            upto = sorted(self.train_rewards)[: self.config.onset_window]
        return _mean(self.train_rewards[s] for s in upto) if upto else 0.0


# --- database helpers and the trainer's hook ------------------------------------------------


def with_flag_rates(run_id: int, rows: list) -> list:
    """``rows`` (StepMetric) with ``metrics["flags/rate"]`` filled in memory where the trainer did
    not record it: the share of scored trajectories (not ``infra_error``) carrying a flag other
    than the infrastructure and sandbox ones (:data:`training.flags.NOT_HACKS`). Nothing is
    saved."""
    missing = [row.step for row in rows if "flags/rate" not in (row.metrics or {})]
    if not missing:
        return rows
    tallies: dict[int, list[int]] = {}
    for step, flags in Trajectory.objects.filter(run_id=run_id, step__in=missing).values_list(
        "step", "flags"
    ):
        flags = flags or []
        if INFRA_ERROR in flags:
            continue
        tally = tallies.setdefault(step, [0, 0])
        tally[0] += any(f not in NOT_HACKS for f in flags)
        tally[1] += 1
    for row in rows:
        if row.step in tallies and tallies[row.step][1]:
            flagged, total = tallies[row.step]
            row.metrics = {**(row.metrics or {}), "flags/rate": flagged / total}
    return rows


_MONITORS: dict[int, DriftMonitor] = {}
_LOCK = threading.Lock()


def forget_monitor(run_id: int | None = None) -> None:
    """Drop the cached monitor of ``run_id`` (every run's when None); the next call rebuilds it."""
    with _LOCK:
        if run_id is None:
            _MONITORS.clear()
        else:
            _MONITORS.pop(run_id, None)


def drift_candidates(run_id: int, step: int, config: DriftConfig) -> list[AlertCandidate]:
    """What fired after step ``step`` of run ``run_id`` was recorded (nothing is saved here:
    :func:`training.services.drift_step`, the trainer's hook, persists it).

    Uses this process's monitor of the run, rebuilt from the persisted rows when there is
    none, when ``config`` changed, or when ``step`` is not after the monitor's last step (a
    rewound and resumed run); feeds it every recorded step after its last one up to ``step``
    and the held-out evaluations up to ``step`` it has not seen.
    """
    with _LOCK:
        monitor = _MONITORS.get(run_id)
        if monitor is None or monitor.config != config or monitor.last_step >= step:
            monitor = DriftMonitor.from_history(run_id, config, before=step)
            _MONITORS[run_id] = monitor
        rows = list(
            StepMetric.objects.filter(run_id=run_id, step__gt=monitor.last_step, step__lte=step)
            .exclude(phase="sft")
            .order_by("step")
        )
        rows = with_flag_rates(run_id, rows)
        evaluations = list(
            HeldOutEvaluation.objects.filter(
                run_id=run_id, step__gt=monitor.last_eval_step, step__lte=step
            ).order_by("step")
        )
        candidates: list[AlertCandidate] = []
        for row in rows:
            candidates += monitor.update(row)
            while evaluations and evaluations[0].step <= row.step:
                candidates += monitor.observe_evaluation(evaluations.pop(0))
        for evaluation in evaluations:
            candidates += monitor.observe_evaluation(evaluation)
    return candidates
