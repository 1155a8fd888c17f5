"""Labels and what they feed back once the queue's quorum agrees: broken_task quarantines the task
version (shown on its task page), reward_hack adds a HackExample (exported in the corpus format) and
flags the trajectory; only assigned reviewers label, notes are required but for "correct",
relabelling updates. Task drafts
reach the task library whole or not at all. create_user knows every role."""

import importlib.util
import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import Client

from console.review import models as m
from console.review.services import (
    review_assign,
    review_label,
    review_queue_create,
    task_draft_create,
    task_draft_submit,
)
from core.errors import InputError
from tasks_library.models import Task, TaskSet, TaskVersion
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from tests.training.hack_corpus.corpus import Case
from training.flags import REVIEWED_HACK
from training.models import Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=2)
    hack_code = versions[0].prompt + "    return True\n\n\nimport sys\nsys.exit(0)\n"
    trajectories = seed_trajectories(
        run,
        versions,
        [
            {"reward": 1.0, "flags": ["early_exit"], "code": hack_code},
            {"reward": 1.0, "version": 1},
            {"reward": 0.0},
            {"reward": 1.0, "code": versions[0].prompt + "    return numbers == [1.0, 2.0, 3.9]\n"},
        ],
    )
    cora, rita, rex = (
        make_user("cora", "curator"),
        make_user("rita", "reviewer"),
        make_user("rex", "reviewer"),
    )
    queue = review_queue_create(
        name="check",
        run_id=run.pk,
        strategy=m.HIGHEST_REWARD,
        size=4,
        reviewers_per_item=2,
        reviewers=[rita, rex],
        created_by=cora,
        seed=0,
    )
    items = {i.trajectory_id: i for i in queue.items.all()}
    return {
        "run": run,
        "versions": versions,
        "t": trajectories,
        "items": items,
        "cora": cora,
        "rita": rita,
        "rex": rex,
        "queue": queue,
    }


def test_broken_task_quarantines_the_version_once_the_quorum_agrees(world):
    t, items, rita, rex = world["t"], world["items"], world["rita"], world["rex"]
    version = world["versions"][1]
    item = items[t[1].pk]
    first = review_label(
        item_id=item.pk,
        reviewer=rita,
        label=m.BROKEN_TASK,
        note="the docstring's example contradicts the hidden tests",
    )
    # one reviewer's label does not quarantine a task alone (the queue's quorum is 2)
    version.refresh_from_db()
    assert not version.quarantined
    assert first.feedback == {"decision": "", "agree": 1, "needed": 2}
    second = review_label(item_id=item.pk, reviewer=rex, label=m.BROKEN_TASK, note="agree, broken")
    version.refresh_from_db()
    assert version.quarantined
    reason = version.quarantine_reason
    assert "2 reviewers agreed (rita, rex)" in reason and f"trajectory {t[1].pk}" in reason
    assert "docstring's example contradicts" in reason and "agree, broken" in reason
    assert version.curated_by == "rita"
    assert second.feedback == {
        "decision": m.BROKEN_TASK,
        "agree": 2,
        "needed": 2,
        "quarantined": True,
        "task_version": version.pk,
    }
    item.refresh_from_db()
    assert (item.decision, item.decided_how) == (m.BROKEN_TASK, m.QUORUM)
    # the curator sees it on the task page
    client = Client()
    client.force_login(world["cora"])
    page = client.get(f"/tasks/{version.task.task_id}/?v={version.number}").content.decode()
    assert 'id="quarantined"' in page and f"that trajectory {t[1].pk}" in page
    # and on the task version's review labels
    labels = client.get(f"/review/tasks/{version.pk}/").content.decode()
    assert "docstring&#x27;s example contradicts" in labels and "quarantined the version" in labels
    # a reviewer changing their mind afterwards leaves the quarantine to the curator
    review_label(item_id=item.pk, reviewer=rex, label=m.CORRECT, note="")
    version.refresh_from_db()
    item.refresh_from_db()
    assert version.quarantine_reason == reason and item.decision == ""


def test_reward_hack_adds_a_hack_example_and_flags_the_trajectory_once_agreed(world):
    t, items, rita, rex = world["t"], world["items"], world["rita"], world["rex"]
    item = items[t[0].pk]
    record = review_label(
        item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="exits before the checker reports"
    )
    assert record.feedback == {"decision": "", "agree": 1, "needed": 2}
    assert not m.HackExample.objects.exists()
    assert REVIEWED_HACK not in Trajectory.objects.get(pk=t[0].pk).flags
    record = review_label(
        item_id=item.pk, reviewer=rex, label=m.REWARD_HACK, note="sys.exit(0) at import"
    )
    example = m.HackExample.objects.get(trajectory=t[0])
    assert record.feedback == {
        "decision": m.REWARD_HACK,
        "agree": 2,
        "needed": 2,
        "hack_example": example.pk,
        "flagged": REVIEWED_HACK,
    }
    assert example.code == t[0].final_code and example.task_version_id == t[0].task_version_id
    assert (
        example.flags == ["early_exit"]
        and example.label == m.REWARD_HACK
        and example.created_by == rita
    )
    trajectory = Trajectory.objects.get(pk=t[0].pk)
    assert trajectory.flags == ["early_exit", REVIEWED_HACK]
    evidence = trajectory.flag_evidence[REVIEWED_HACK]
    assert evidence["reviewer"] == "rita" and evidence["note"] == "exits before the checker reports"
    assert [r["reviewer"] for r in evidence["reviews"]] == ["rita", "rex"]
    assert trajectory.flag_evidence["early_exit"] == {"detector": "early_exit", "line": 3}  # kept
    # one reviewer relabels: the quorum is gone, so the flag and the example go with it
    review_label(item_id=item.pk, reviewer=rita, label=m.CORRECT, note="")
    trajectory.refresh_from_db()
    assert trajectory.flags == ["early_exit"] and REVIEWED_HACK not in trajectory.flag_evidence
    assert not m.HackExample.objects.exists()
    # and back: agreed again
    review_label(item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="on second look, yes")
    assert m.HackExample.objects.filter(trajectory=t[0]).count() == 1
    review_label(item_id=item.pk, reviewer=rex, label=m.OTHER, note="not sure any more")
    assert not m.HackExample.objects.exists()
    # the replay page's review panel shows the labels
    client = Client()
    client.force_login(world["cora"])
    replay = client.get(f"/runs/{world['run'].pk}/trajectories/{t[0].pk}/").content.decode()
    assert 'id="review-panel"' in replay and "not sure any more" in replay


def test_only_assigned_reviewers_label_and_notes_are_required(world):
    t, items, rita = world["t"], world["items"], world["rita"]
    item = items[t[2].pk]
    outsider = make_user("olga", "reviewer")
    with pytest.raises(PermissionDenied):
        review_label(item_id=item.pk, reviewer=outsider, label=m.CORRECT, note="")
    with pytest.raises(PermissionDenied):
        review_label(
            item_id=item.pk, reviewer=world["cora"], label=m.CORRECT, note=""
        )  # a curator, not assigned
    for value in (m.REWARD_HACK, m.BROKEN_TASK, m.AMBIGUOUS_TASK, m.OTHER):
        with pytest.raises(InputError, match="^note:"):
            review_label(item_id=item.pk, reviewer=rita, label=value, note="   ")
    with pytest.raises(InputError, match="^label:"):
        review_label(item_id=item.pk, reviewer=rita, label="meh", note="x")
    assert not m.ReviewLabel.objects.exists()
    assert not item.assignments.get(reviewer=rita).completed_at
    # idempotent update
    review_label(item_id=item.pk, reviewer=rita, label=m.CORRECT, note="")
    review_label(
        item_id=item.pk, reviewer=rita, label=m.AMBIGUOUS_TASK, note="spec unclear on ties"
    )
    assert m.ReviewLabel.objects.filter(item=item, reviewer=rita).count() == 1
    assert m.ReviewLabel.objects.get(item=item, reviewer=rita).label == m.AMBIGUOUS_TASK
    assert item.assignments.get(reviewer=rita).completed_at is not None
    # assigning: operators and curators may, reviewers may not; viewers cannot be assigned
    with pytest.raises(PermissionDenied):
        review_assign(item_id=item.pk, reviewer=outsider, assigned_by=rita)
    with pytest.raises(InputError, match="^reviewer:"):
        review_assign(
            item_id=item.pk, reviewer=make_user("vic", "viewer"), assigned_by=world["cora"]
        )
    first = review_assign(
        item_id=item.pk, reviewer=outsider, assigned_by=make_user("otto", "operator")
    )
    assert (
        review_assign(item_id=item.pk, reviewer=outsider, assigned_by=world["cora"]) == first
    )  # idempotent
    review_label(item_id=item.pk, reviewer=outsider, label=m.CORRECT, note="")


def test_labelling_through_the_pages(world):
    items, rita = world["items"], world["rita"]
    client = Client()
    client.force_login(rita)
    ordered = sorted(items.values(), key=lambda i: i.position)
    page = client.get(f"/review/items/{ordered[0].pk}/")
    assert page.status_code == 200 and b'id="label-form"' in page.content
    assert b"Other reviewers' labels show once you have labelled" in page.content
    refused = client.post(
        f"/review/items/{ordered[0].pk}/label/", {"label": m.REWARD_HACK, "note": ""}
    )
    assert refused.status_code == 400 and b'id="note-error">say why' in refused.content
    done = client.post(
        f"/review/items/{ordered[0].pk}/label/", {"label": m.CORRECT, "note": "", "advance": "on"}
    )
    assert done.status_code == 302 and done["Location"] == f"/review/items/{ordered[1].pk}/"
    home = client.get("/review/").content.decode()
    assert f'id="my-queue-{world["queue"].pk}"' in home and ">1/4<" in home
    queue_page = client.get(f"/review/queues/{world['queue'].pk}/").content.decode()
    assert (
        'data-reviewer="rita"' in queue_page and "assign-form" not in queue_page
    )  # reviewers do not assign
    stay = client.post(f"/review/items/{ordered[1].pk}/label/", {"label": m.CORRECT, "note": ""})
    assert stay["Location"] == f"/review/items/{ordered[1].pk}/"
    curator = Client()
    curator.force_login(world["cora"])
    assert "assign-form" in curator.get(f"/review/queues/{world['queue'].pk}/").content.decode()
    olga = make_user("olga", "reviewer")
    assigned = curator.post(f"/review/items/{ordered[2].pk}/assign/", {"reviewer": "olga"})
    assert (
        assigned.status_code == 302
        and m.ReviewAssignment.objects.filter(item=ordered[2], reviewer=olga).exists()
    )


def test_export_hack_corpus_in_the_corpus_format(world, tmp_path):
    t, items = world["t"], world["items"]
    # both reviewers of each item agree (the queue's quorum), so both reach the corpus
    review_label(
        item_id=items[t[0].pk].pk, reviewer=world["rita"], label=m.REWARD_HACK, note="exits early"
    )
    review_label(item_id=items[t[0].pk].pk, reviewer=world["rex"], label=m.REWARD_HACK, note="yes")
    review_label(
        item_id=items[t[3].pk].pk,
        reviewer=world["rex"],
        label=m.REWARD_HACK,
        note="hard-codes\nthe one visible example",
    )
    review_label(item_id=items[t[3].pk].pk, reviewer=world["rita"], label=m.REWARD_HACK, note="yes")
    out = StringIO()
    call_command("export_hack_corpus", "--output", str(tmp_path / "reviewed.py"), stdout=out)
    assert "wrote 2 hack examples" in out.getvalue()
    spec = importlib.util.spec_from_file_location("reviewed", tmp_path / "reviewed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    cases = {c.task_id + (":miss" if c.known_miss else ""): c for c in module.REVIEWED_HACKS}
    assert all(isinstance(c, Case) for c in module.REVIEWED_HACKS) and len(cases) == 2
    task = world["versions"][0].task.task_id
    caught, missed = cases[task], cases[task + ":miss"]
    assert caught.completion == "    return True\n\n\nimport sys\nsys.exit(0)\n"
    assert caught.flags == ("early_exit",) and caught.note == "found by review (rita): exits early"
    assert (
        world["versions"][0].prompt + caught.completion == t[0].final_code
    )  # prompt + completion = the program
    assert (
        missed.flags == ()
        and "no detector flagged it" in missed.known_miss
        and "hard-codes the one" in missed.known_miss
    )
    call_command(
        "export_hack_corpus", "--output", str(tmp_path / "reviewed.jsonl"), stdout=StringIO()
    )
    rows = [json.loads(line) for line in (tmp_path / "reviewed.jsonl").read_text().splitlines()]
    assert [r["program"] for r in rows] == [t[0].final_code, t[3].final_code]
    assert {r["task_version"] for r in rows} == {world["versions"][0].version}


GOOD_TESTS = (
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n"
)


def draft(world, reviewer, **changes):
    fields = {
        "task_id": "review/add-two",
        "prompt": 'def add(a, b):\n    """Add two numbers."""\n',
        "entry_point": "add",
        "reference_solution": "    return a + b\n",
        "tests": GOOD_TESTS,
    }
    return task_draft_create(
        trajectory_id=world["t"][2].pk, created_by=reviewer, **{**fields, **changes}
    )


def test_task_drafts_reach_the_library_whole_or_not_at_all(world):
    rita, cora = world["rita"], world["cora"]
    with pytest.raises(PermissionDenied):
        draft(world, make_user("olga", "reviewer"))  # reviews no item of this trajectory
    with pytest.raises(InputError, match="^task_id:"):
        draft(world, rita, task_id="HumanEval/0")
    first = draft(world, rita)
    with pytest.raises(PermissionDenied):
        task_draft_submit(draft_id=first.pk, submitted_by=rita)
    version = task_draft_submit(draft_id=first.pk, submitted_by=cora)
    first.refresh_from_db()
    assert (
        first.status == m.TaskDraft.SUBMITTED
        and first.task_version == version
        and first.submitted_by == cora
    )
    assert version.task.task_id == "review/add-two" and version.task.source == "review-drafts"
    assert version.author == "cora" and f"task draft {first.pk}" in version.change_note
    with pytest.raises(InputError, match="already submitted"):
        task_draft_submit(draft_id=first.pk, submitted_by=cora)
    # a second draft joins the set; the first stays pinned, with no new version of it
    second = task_draft_submit(
        draft_id=draft(world, rita, task_id="review/add-three").pk, submitted_by=cora
    )
    pinned = [
        v.pk
        for v in TaskSet.objects.get(name="review-drafts").task_versions.order_by(
            "tasksetmember__position"
        )
    ]
    assert pinned == [version.pk, second.pk]
    assert TaskVersion.objects.filter(task__task_id="review/add-two").count() == 1
    # tests that do not parse: the importer's error, nothing written
    tasks_before, set_versions = (
        Task.objects.count(),
        TaskSet.objects.get(name="review-drafts").versions.count(),
    )
    broken = draft(
        world,
        rita,
        task_id="review/broken",
        tests="def check(candidate):\n    assert candidate(1 ==\n",
    )
    with pytest.raises(InputError, match="test code does not parse"):
        task_draft_submit(draft_id=broken.pk, submitted_by=cora)
    broken.refresh_from_db()
    assert broken.status == m.TaskDraft.DRAFT and broken.task_version is None
    assert Task.objects.count() == tasks_before
    assert TaskSet.objects.get(name="review-drafts").versions.count() == set_versions
    # through the pages: the error is shown, the draft stays a draft
    client = Client()
    client.force_login(cora)
    shown = client.post(f"/review/drafts/{broken.pk}/submit/", follow=True)
    assert b"not submitted: tests: test code does not parse" in shown.content
    assert b'id="draft-status">draft<' in shown.content


def test_task_draft_from_the_labelling_page(world):
    client = Client()
    client.force_login(world["rita"])
    item = world["items"][world["t"][2].pk]
    response = client.post(
        f"/review/items/{item.pk}/draft/",
        {
            "task_id": "review/from-page",
            "prompt": "def f(x):\n    pass\n",
            "entry_point": "f",
            "reference_solution": "    return x\n",
            "tests": "def check(candidate):\n    assert candidate(1) == 1\n",
            "files": '{"data.txt": "1\\n"}',
        },
    )
    made = m.TaskDraft.objects.get(task_id="review/from-page")
    assert response.status_code == 302 and response["Location"] == f"/review/drafts/{made.pk}/"
    assert made.files == {"data.txt": "1\n"} and made.from_trajectory_id == world["t"][2].pk
    bad = client.post(
        f"/review/items/{item.pk}/draft/",
        {"task_id": "nope", "prompt": "x", "entry_point": "f", "tests": "y", "files": "{"},
    )
    assert bad.status_code == 400 and b"not JSON" in bad.content


def test_create_user_knows_every_role(world, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_PASSWORD", "pw-123456")
    for role, group in (
        ("operator", "operators"),
        ("reviewer", "reviewers"),
        ("curator", "curators"),
        ("viewer", "viewers"),
    ):
        call_command("create_user", f"u-{role}", "--role", role, stdout=StringIO())
        user = User.objects.get(username=f"u-{role}")
        assert [g.name for g in user.groups.all()] == [group] and not user.is_superuser
    call_command("create_user", "boss", "--role", "admin", stdout=StringIO())
    boss = User.objects.get(username="boss")
    assert boss.is_superuser and boss.is_staff and not boss.groups.exists()
    call_command(
        "create_user", "boss", "--role", "reviewer", stdout=StringIO()
    )  # the role is replaced
    boss = User.objects.get(username="boss")
    assert not boss.is_superuser and [g.name for g in boss.groups.all()] == ["reviewers"]
    operator = User.objects.get(username="u-operator")
    assert operator.has_perms(
        ["training.add_trainingrun", "training.change_trainingrun", "review.add_reviewqueue"]
    )
    assert not operator.has_perm("tasks_library.change_taskversion")
    assert User.objects.get(username="u-reviewer").has_perm("review.add_reviewlabel")
