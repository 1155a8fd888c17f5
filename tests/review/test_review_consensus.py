"""A queue's consensus rule and label set. One reviewer's label does not feed back alone unless the
queue says so (``quorum=1``); under ``consensus="curator"`` only a curator's confirmation does;
two labels that both reach the quorum decide nothing; a queue's own label set is what its
reviewers choose from. The rule is stated on the queue and labelling pages."""

import html

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from console.review import models as m
from console.review.services import review_item_confirm, review_label, review_queue_create
from core.errors import InputError
from tasks_library.models import TaskVersion
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.flags import REVIEWED_HACK
from training.models import Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=1)
    (trajectory,) = seed_trajectories(run, versions, [{"reward": 1.0}])
    reviewers = [make_user(name, "reviewer") for name in ("rita", "rex", "ria", "roy")]
    return run, versions[0], trajectory, make_user("cora", "curator"), reviewers


def queue_of(team, **options):
    run, _version, _t, cora, reviewers = team
    k = options.pop("reviewers_per_item", 2)
    queue = review_queue_create(
        name=f"q{m.ReviewQueue.objects.count()}",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=k,
        reviewers=reviewers[:k],
        created_by=cora,
        **options,
    )
    return queue, queue.items.get()


def quarantined(version) -> bool:
    return TaskVersion.objects.get(pk=version.pk).quarantined


def test_under_the_curator_rule_only_a_curator_feeds_back(team):
    _run, version, trajectory, cora, (rita, rex, *_) = team
    queue, item = queue_of(team, consensus=m.CURATOR)
    assert "only once a curator confirms" in queue.consensus_text
    review_label(item_id=item.pk, reviewer=rita, label=m.BROKEN_TASK, note="tests contradict")
    review_label(item_id=item.pk, reviewer=rex, label=m.BROKEN_TASK, note="agreed")
    assert not quarantined(version)
    with pytest.raises(PermissionDenied):
        review_item_confirm(item_id=item.pk, curator=rita, label=m.BROKEN_TASK, note="me too")
    with pytest.raises(InputError, match="^note:"):
        review_item_confirm(item_id=item.pk, curator=cora, label=m.BROKEN_TASK, note="")
    review_item_confirm(item_id=item.pk, curator=cora, label=m.BROKEN_TASK, note="checked: broken")
    version.refresh_from_db()
    assert version.quarantined and "curator cora confirmed" in version.quarantine_reason
    assert "rita: tests contradict" in version.quarantine_reason
    assert "cora (curator): checked: broken" in version.quarantine_reason
    item.refresh_from_db()
    assert (item.decision, item.decided_how) == (m.BROKEN_TASK, m.CURATOR)
    # reviewers changing their labels later do not undo a curator's decision
    review_label(item_id=item.pk, reviewer=rex, label=m.CORRECT)
    item.refresh_from_db()
    assert item.decision == m.BROKEN_TASK


def test_a_curator_confirms_a_hack_one_reviewer_saw(team):
    _run, _version, trajectory, cora, (rita, *_) = team
    _queue, item = queue_of(team)  # quorum 2 of 2
    review_label(item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="reads the tests")
    assert REVIEWED_HACK not in Trajectory.objects.get(pk=trajectory.pk).flags
    review_item_confirm(item_id=item.pk, curator=cora, label=m.REWARD_HACK, note="confirmed")
    flagged = Trajectory.objects.get(pk=trajectory.pk)
    assert REVIEWED_HACK in flagged.flags
    reviews = flagged.flag_evidence[REVIEWED_HACK]["reviews"]
    assert [(r["reviewer"], r.get("confirmed", False)) for r in reviews] == [
        ("rita", False),
        ("cora", True),
    ]
    assert m.HackExample.objects.filter(trajectory=trajectory).exists()
    # the curator changes their mind: the evidence of this item goes, the flag with it
    review_item_confirm(item_id=item.pk, curator=cora, label=m.CORRECT, note="")
    assert REVIEWED_HACK not in Trajectory.objects.get(pk=trajectory.pk).flags
    assert not m.HackExample.objects.exists()


def test_a_quorum_of_one_is_allowed_and_said(team):
    _run, version, _t, _cora, (rita, *_) = team
    queue, item = queue_of(team, quorum=1)
    assert "one reviewer's label is enough" in queue.consensus_text
    review_label(item_id=item.pk, reviewer=rita, label=m.BROKEN_TASK, note="broken")
    assert quarantined(version)


def test_one_reviewer_per_item_waits_for_a_curator_by_default(team):
    _run, version, _t, _cora, (rita, *_) = team
    queue, item = queue_of(team, reviewers_per_item=1)
    assert queue.consensus == m.CURATOR
    review_label(item_id=item.pk, reviewer=rita, label=m.BROKEN_TASK, note="broken")
    assert not quarantined(version)


def test_two_labels_both_at_the_quorum_decide_nothing(team):
    _run, _version, trajectory, _cora, (rita, rex, ria, roy) = team
    _queue, item = queue_of(team, reviewers_per_item=4, quorum=2)
    review_label(item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="hack")
    review_label(item_id=item.pk, reviewer=rex, label=m.CORRECT)
    review_label(item_id=item.pk, reviewer=ria, label=m.CORRECT)
    item.refresh_from_db()
    assert item.decision == m.CORRECT
    review_label(item_id=item.pk, reviewer=roy, label=m.REWARD_HACK, note="hack too")
    item.refresh_from_db()
    assert (
        item.decision == "" and REVIEWED_HACK not in Trajectory.objects.get(pk=trajectory.pk).flags
    )


def test_a_queue_has_its_own_label_set(team):
    _run, version, _t, cora, (rita, rex, *_) = team
    queue, item = queue_of(
        team,
        labels=["correct", "reward_hack", {"value": "off_topic", "title": "answers another task"}],
        quorum=1,
    )
    assert [lab["value"] for lab in queue.label_set] == ["correct", "reward_hack", "off_topic"]
    assert queue.label_set[1]["title"] == "reward hack"  # a built-in keeps its title
    with pytest.raises(InputError, match="^label:"):
        review_label(item_id=item.pk, reviewer=rita, label=m.BROKEN_TASK, note="x")
    review_label(item_id=item.pk, reviewer=rita, label="off_topic")  # no note needed
    item.refresh_from_db()
    assert item.decision == "off_topic" and item.feedback == {}  # decided, feeds nothing back
    assert not quarantined(version)
    client = Client()
    client.force_login(rex)
    page = html.unescape(client.get(f"/review/items/{item.pk}/").content.decode())
    assert 'data-key="3"' in page and "answers another task" in page
    assert 'data-key="4"' not in page and "broken task" not in page.lower().split("consensus")[0]
    assert 'id="consensus-rule"' in page and "“reward hack” labels feed back" in page
    queue_page = html.unescape(client.get(f"/review/queues/{queue.pk}/").content.decode())
    assert queue.consensus_text in queue_page


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"labels": ["correct"]}, "labels"),
        ({"labels": [f"l{i}" for i in range(10)]}, "labels"),
        ({"labels": ["correct", "correct"]}, "labels"),
        ({"labels": ["correct", "Bad Value"]}, "labels"),
        ({"labels": ["correct", {"value": "x", "title": "t" * 41}]}, "labels"),
        ({"quorum": 3}, "quorum"),
        ({"quorum": 0}, "quorum"),
        ({"consensus": "vote"}, "consensus"),
    ],
)
def test_bad_rules_and_label_sets_are_refused_naming_the_field(team, options, field):
    with pytest.raises(InputError) as refused:
        queue_of(team, **options)
    assert refused.value.field == field and str(refused.value).startswith(f"{field}:")
    assert not m.ReviewQueue.objects.exists()
