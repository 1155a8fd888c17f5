"""Any recorded metric of a run, step by step, for the metric pickers: exact up to 1,000 steps,
averaged in the database over buckets of consecutive steps past that; a metric a step did not
record is None there; too many names are refused naming the parameter."""

import pytest
from django.test import Client

from tests.training.conftest import one_task_run
from training.models import StepMetric
from training.selectors import run_metric_series

pytestmark = pytest.mark.django_db


def seed(run, steps: int) -> None:
    StepMetric.objects.bulk_create(
        StepMetric(
            run=run,
            step=step,
            reward_mean=0.5,
            metrics={
                "agent/calls_bash": float(step),
                **({"tokens/trained": 7} if step % 2 else {}),
            },
        )
        for step in range(1, steps + 1)
    )


def test_series_exact_then_binned():
    run = one_task_run()
    seed(run, 4)
    exact = run_metric_series(run_id=run.pk, names=["agent/calls_bash", "tokens/trained", "nope"])
    assert exact["binned"] is False and exact["step"] == [1, 2, 3, 4]
    assert exact["series"]["agent/calls_bash"] == [1.0, 2.0, 3.0, 4.0]
    assert exact["series"]["tokens/trained"] == [7, None, 7, None]
    assert exact["series"]["nope"] == [None] * 4

    long = one_task_run()
    seed(long, 2500)
    binned = run_metric_series(run_id=long.pk, names=["agent/calls_bash"], max_points=1000)
    assert binned["binned"] is True and len(binned["step"]) == 834  # buckets of 3 steps
    assert binned["first_step"][:2] == [1, 4] and binned["step"][:2] == [3, 6]
    assert binned["series"]["agent/calls_bash"][0] == pytest.approx(2.0)  # mean of 1, 2, 3
    assert binned["step"][-1] == 2500


def test_the_api_names_every_metric_and_refuses_too_many():
    run = one_task_run()
    seed(run, 3)
    answer = Client().get(f"/api/runs/{run.pk}/metrics/", {"name": ["agent/calls_bash"]}).json()
    assert answer["series"]["agent/calls_bash"] == [1.0, 2.0, 3.0]
    assert "agent/calls_bash" in answer["names"] and "tokens/trained" in answer["names"]
    refused = Client().get(f"/api/runs/{run.pk}/metrics/", {"name": [f"m{i}" for i in range(13)]})
    assert refused.status_code == 400 and refused.json()["field"] == "name"
