"""Alerts in the database: merged within the cool-down, new after it, acknowledged with a note by
curators and operators only, broadcast to the run's watchers; the trainer's hook rebuilds its
monitor from the persisted steps."""

import asyncio

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.test import Client

from core.events import run_group
from tasks_library.models import TaskSet
from tests.tasks_library.conftest import library, make_user, roles  # noqa: F401 (fixtures)
from training import drift, selectors, services
from training.drift import AlertCandidate, DriftConfig, DriftMonitor
from training.models import Alert, HeldOutEvaluation, StepMetric, TrainingRun, Trajectory
from training.services import drift_step

pytestmark = pytest.mark.django_db

BINS = [i / 10 for i in range(11)]


@pytest.fixture
def run(db):
    task_set = TaskSet.objects.create(name="alerts")
    run = TrainingRun.objects.create(
        task_set=task_set,
        total_steps=200,
        status=TrainingRun.RUNNING,
        config={"drift": {"cooldown_steps": 5}},
    )
    drift.forget_monitor()
    yield run
    drift.forget_monitor()


def candidate(
    step: int,
    detector: str = "page_hinkley_down",
    severity: str = "warning",
    stream: str = "reward/mean",
):
    return AlertCandidate(
        step=step,
        stream=stream,
        detector=detector,
        statistic=13.0,
        threshold=12.0,
        window=30,
        severity=severity,
        message=f"{stream} drifted down at {step}",
    )


class Watcher:
    """A channel in the run's group, as a browser's websocket consumer joins it."""

    def __init__(self, run_id: int):
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(run_group(run_id), self.channel)

    def receive(self) -> dict:
        async def get():
            return await asyncio.wait_for(self.layer.receive(self.channel), 5)

        message = async_to_sync(get)()
        assert message["type"] == "run.event"
        return message["event"]


def test_repeats_within_cooldown_merge_and_later_ones_make_a_new_alert(run):
    first = services.alerts_raise(run_id=run.pk, step=30, candidates=[candidate(30)])
    assert (
        len(first) == 1
        and first[0].repeats == 0
        and (first[0].step, first[0].last_step) == (30, 30)
    )
    # steps 33 and 38: each within 5 steps of the last repeat -> merged, even though 38 - 30 > 5
    for step in (33, 38):
        merged = services.alerts_raise(run_id=run.pk, step=step, candidates=[candidate(step)])
        assert [a.pk for a in merged] == [first[0].pk]
    alert = Alert.objects.get(pk=first[0].pk)
    assert (alert.step, alert.last_step, alert.repeats) == (30, 38, 2)
    # the same step delivered again changes nothing
    assert services.alerts_raise(run_id=run.pk, step=38, candidates=[candidate(38)]) == []
    assert Alert.objects.get(pk=alert.pk).repeats == 2
    # another detector or stream is its own alert
    other = services.alerts_raise(
        run_id=run.pk, step=38, candidates=[candidate(38, detector="adwin")]
    )
    assert other[0].pk != alert.pk
    # past the cool-down: a new alert
    later = services.alerts_raise(run_id=run.pk, step=44, candidates=[candidate(44)])
    assert later[0].pk != alert.pk and later[0].repeats == 0
    assert Alert.objects.filter(run=run, detector="page_hinkley_down").count() == 2
    # a more severe repeat raises the merged alert's severity
    services.alerts_raise(run_id=run.pk, step=46, candidates=[candidate(46, severity="critical")])
    assert Alert.objects.get(pk=later[0].pk).severity == "critical"


def test_cooldown_comes_from_the_run_config_unless_given(run):
    services.alerts_raise(run_id=run.pk, step=10, candidates=[candidate(10)])
    services.alerts_raise(run_id=run.pk, step=16, candidates=[candidate(16)])  # 6 > 5 (run config)
    assert Alert.objects.filter(run=run).count() == 2
    services.alerts_raise(run_id=run.pk, step=30, candidates=[candidate(30)], cooldown_steps=20)
    assert Alert.objects.filter(run=run).count() == 2  # merged into the step-16 alert


def test_broadcast_payload_and_backfill(run):
    watcher = Watcher(run.pk)
    alert = services.alerts_raise(run_id=run.pk, step=12, candidates=[candidate(12)])[0]
    event = watcher.receive()
    assert event == {
        "kind": "alert",
        "id": alert.pk,
        "run_id": run.pk,
        "step": 12,
        "last_step": 12,
        "stream": "reward/mean",
        "detector": "page_hinkley_down",
        "statistic": 13.0,
        "threshold": 12.0,
        "window": 30,
        "severity": "warning",
        "message": "reward/mean drifted down at 12",
        "repeats": 0,
        "created_at": alert.created_at.isoformat(),
        "acknowledged": False,
        "acknowledged_at": None,
        "acknowledged_by": None,
        "acknowledgement_note": "",
    }
    services.alerts_raise(run_id=run.pk, step=14, candidates=[candidate(14)])
    repeat = watcher.receive()
    assert (repeat["id"], repeat["repeats"], repeat["last_step"]) == (alert.pk, 1, 14)
    # a reconnecting client gets status, steps, then the alerts in their current state
    StepMetric.objects.create(
        run=run, step=1, reward_mean=0.5, reward_histogram=[1] * 10, reward_bins=BINS
    )
    kinds = [e["kind"] for e in selectors.run_backfill(run_id=run.pk, after=0)]
    assert kinds[0] == "status" and kinds[1] == "step" and kinds[-1] == "alert"
    backfilled = [e for e in selectors.run_backfill(run_id=run.pk, after=0) if e["kind"] == "alert"]
    assert backfilled == [{**repeat}]


def test_acknowledge_with_note_is_idempotent_and_broadcast(run, roles):
    alert = services.alerts_raise(run_id=run.pk, step=12, candidates=[candidate(12)])[0]
    curator = make_user("cora", "curators")
    watcher = Watcher(run.pk)
    with pytest.raises(ValueError, match="note"):
        services.alert_acknowledge(alert_id=alert.pk, user=curator, note="   ")
    acked = services.alert_acknowledge(
        alert_id=alert.pk, user=curator, note="reward fell after the lr change; watching"
    )
    assert acked.acknowledged_at is not None and acked.acknowledged_by == curator
    event = watcher.receive()
    assert (
        event["id"] == alert.pk
        and event["acknowledged"] is True
        and event["acknowledged_by"] == "cora"
    )
    assert event["acknowledgement_note"] == "reward fell after the lr change; watching"
    # a second acknowledgement keeps the first one
    operator = make_user("otto", None)
    operator.user_permissions.add(Permission.objects.get(codename="change_trainingrun"))
    again = services.alert_acknowledge(alert_id=alert.pk, user=operator, note="seen too")
    assert again.acknowledged_by == curator and again.acknowledgement_note.startswith("reward fell")
    assert again.acknowledged_at == acked.acknowledged_at


def test_viewers_cannot_acknowledge(run, roles):
    alert = services.alerts_raise(run_id=run.pk, step=12, candidates=[candidate(12)])[0]
    viewer = make_user("vic", "viewers")
    with pytest.raises(PermissionDenied):
        services.alert_acknowledge(alert_id=alert.pk, user=viewer, note="looks fine")
    client = Client()
    client.force_login(viewer)
    url = f"/runs/{run.pk}/alerts/{alert.pk}/ack/"
    assert client.post(url, {"note": "looks fine"}).status_code == 403
    assert client.post(url, {"note": "looks fine"}, HTTP_ACCEPT="application/json").json()["error"]
    anonymous = Client().post(url, {"note": "x"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert Alert.objects.get(pk=alert.pk).acknowledged_at is None
    page = client.get(f"/runs/{run.pk}/")
    assert b'data-can-ack="0"' in page.content


def test_the_console_view_acknowledges_for_curators_with_csrf(run, roles):
    alert = services.alerts_raise(run_id=run.pk, step=12, candidates=[candidate(12)])[0]
    curator = make_user("cora", "curators")
    client = Client(enforce_csrf_checks=True)
    client.force_login(curator)
    page = client.get(f"/runs/{run.pk}/")
    assert b'data-can-ack="1"' in page.content
    url = f"/runs/{run.pk}/alerts/{alert.pk}/ack/"
    assert client.post(url, {"note": "checked"}).status_code == 403  # no CSRF token
    token = page.cookies["csrftoken"].value
    missing = client.post(url, {"note": ""}, HTTP_X_CSRFTOKEN=token, HTTP_ACCEPT="application/json")
    assert missing.status_code == 400 and "note" in missing.json()["error"]
    answer = client.post(
        url,
        {"note": "checked the held-out set"},
        HTTP_X_CSRFTOKEN=token,
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 200 and answer.json()["acknowledged_by"] == "cora"
    assert (
        client.post(
            f"/runs/{run.pk}/alerts/{alert.pk + 99}/ack/", {"note": "x"}, HTTP_X_CSRFTOKEN=token
        ).status_code
        == 404
    )
    assert client.get(url).status_code == 405


def record(run, step: int, rewards, **metrics) -> StepMetric:
    mean = float(np.mean(rewards))
    counts = np.bincount(
        np.minimum((np.asarray(rewards) * 10).astype(int), 9), minlength=10
    ).tolist()
    return StepMetric.objects.create(
        run=run,
        step=step,
        reward_mean=mean,
        reward_histogram=counts,
        reward_bins=BINS,
        metrics={"reward/mean": mean, **metrics},
    )


def test_drift_step_persists_dedups_and_survives_a_restart(run):
    """Bernoulli(0.3) means of 64 until step 40, then 0.55: the hook raises Page-Hinkley, ADWIN and
    Wasserstein alerts, merged over the cool-down; a worker that lost its monitor at step 50 (cache
    cleared) rebuilds it from the rows and raises exactly what the uninterrupted one would."""
    config = DriftConfig(cooldown_steps=5)
    rng = np.random.default_rng(11)
    rows = [
        (step, (rng.random(64) < (0.3 if step <= 40 else 0.55)).astype(float))
        for step in range(1, 81)
    ]
    for step, rewards in rows:
        record(run, step, rewards, **{"flags/rate": 0.0})
        drift_step(run.pk, step, config)
        if step == 50:
            drift.forget_monitor(run.pk)
    alerts = list(Alert.objects.filter(run=run).order_by("id"))
    assert alerts and all(a.step > 40 for a in alerts)
    detectors = {a.detector for a in alerts}
    assert {"page_hinkley_up", "adwin", "wasserstein"} <= detectors
    wasserstein = [a for a in alerts if a.detector == "wasserstein"]
    assert (
        len(wasserstein) == 1 and wasserstein[0].repeats > 20
    )  # fires every step from ~43, merged

    # the same stream through one uninterrupted monitor gives the same (step, stream, detector)
    # firings
    monitor, expected = DriftMonitor(config), []
    for row in StepMetric.objects.filter(run=run).order_by("step"):
        expected += [(c.stream, c.detector) for c in monitor.update(row)]
    assert {(a.stream, a.detector) for a in alerts} == set(expected)
    rebuilt = DriftMonitor.from_history(run.pk, config)
    assert rebuilt.last_step == 80 and rebuilt.streams[
        "reward/mean"
    ].reference.mean == pytest.approx(monitor.streams["reward/mean"].reference.mean)


def test_flag_rate_is_computed_from_trajectories_when_missing(run, library):
    version = library[0]
    row = StepMetric.objects.create(
        run=run,
        step=1,
        reward_mean=0.5,
        reward_histogram=[1] * 10,
        reward_bins=BINS,
        metrics={"reward/mean": 0.5},
    )
    for i, flags in enumerate(
        [[], ["tests_modified"], ["timeout"], ["infra_error"], [], ["exit_early", "crashed"]]
    ):
        Trajectory.objects.create(
            run=run,
            step=1,
            group=0,
            index_in_group=i,
            task_version=version,
            status="ok",
            reward=0.5,
            flags=flags,
        )
    [filled] = drift.with_flag_rates(run.pk, [row])
    # 5 scored (infra_error dropped); 2 carry a hack flag (sandbox statuses are not hacks)
    assert filled.metrics["flags/rate"] == pytest.approx(2 / 5)
    assert "flags/rate" not in StepMetric.objects.get(pk=row.pk).metrics  # nothing saved


def test_a_late_heldout_evaluation_is_read_when_the_hook_is_called_again(run):
    """Training reward rising 0.3 -> 0.6 over 40 steps; held-out 0.40, 0.42, 0.43 at steps 10-30 and
    0.35 at step 40, recorded after the hook ran for step 40: calling the hook again for step 40
    raises the critical onset alert once, and a third call changes nothing."""
    config = DriftConfig()
    rng = np.random.default_rng(12)
    heldout = {10: 0.40, 20: 0.42, 30: 0.43}
    for step in range(1, 41):
        record(run, step, (rng.random(64) < 0.3 + 0.3 * step / 40).astype(float))
        if step in heldout:
            HeldOutEvaluation.objects.create(
                run=run,
                step=step,
                task_set=run.task_set,
                tasks=8,
                samples_per_task=4,
                reward_mean=heldout[step],
            )
        drift_step(run.pk, step, config)
    assert not Alert.objects.filter(detector="onset:train_up_heldout_down").exists()
    HeldOutEvaluation.objects.create(
        run=run, step=40, task_set=run.task_set, tasks=8, samples_per_task=4, reward_mean=0.35
    )
    before = {a.pk: a.repeats for a in Alert.objects.filter(run=run)}
    raised = drift_step(run.pk, 40, config)
    onset = [a for a in raised if a.detector == "onset:train_up_heldout_down"]
    assert (
        len(onset) == 1
        and onset[0].severity == "critical"
        and onset[0].statistic == pytest.approx(0.08)
    )
    assert {a.pk: a.repeats for a in Alert.objects.filter(run=run) if a.pk in before} == before
    assert drift_step(run.pk, 40, config) == []
