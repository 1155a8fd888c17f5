"""A trajectory a reviewer labelled a reward hack (``reviewed_hack``) no longer shows the rule
monitor's "0.000 no hack flags" as if nothing were wrong: the monitor table carries the human
review as a row of its own, and the rule monitor's row says why the two differ (it scores the
automatic detectors only, which missed it). On the replay page and the labelling page."""

import html

import pytest
from django.test import Client

from console.review import models as m
from console.review.services import review_label, review_queue_create
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.models import MonitorScore, Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(humaneval):
    make_roles()
    curator, rita = make_user("cora", "curator"), make_user("rita", "reviewer")
    run, versions = seed_run(humaneval, tasks=1)
    (trajectory,) = seed_trajectories(
        run, versions, [{"reward": 1.0, "monitors": [("rules", 0.0)]}]
    )
    MonitorScore.objects.filter(trajectory=trajectory).update(reason="no hack flags")
    queue = review_queue_create(
        name="hacks",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=curator,
        quorum=1,  # one reviewer's word feeds back in this queue
    )
    item = queue.items.get()
    review_label(item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="reads the tests' file")
    assert "reviewed_hack" in Trajectory.objects.get(pk=trajectory.pk).flags
    return curator, run, trajectory, item


def monitor_panel(page: str) -> str:
    start = page.index('id="monitor-scores"')
    return page[start : page.index("</table>", start)]


def test_the_replay_shows_the_review_beside_the_rule_monitor_and_why_they_differ(labelled):
    curator, run, trajectory, item = labelled
    client = Client()
    client.force_login(curator)
    for path in (f"/runs/{run.pk}/trajectories/{trajectory.pk}/", f"/review/items/{item.pk}/"):
        panel = html.unescape(monitor_panel(client.get(path).content.decode()))
        assert 'data-monitor="review"' in panel, path
        assert "reward hack" in panel and "rita" in panel, path
        assert 'data-monitor="rules"' in panel and "no hack flags" in panel, path
        note = panel[panel.index('class="monitor-note"') :]
        assert "automatic detectors" in note and "reviewer" in note, (path, note[:300])
