"""Agreement statistics against values worked by hand (and published examples), and the verifier's
precision and recall against the reviewers' majority, from the formulas through the run summary
page."""

import math

import pytest
from django.test import Client

from console.review import models as m
from console.review.agreement import (
    agreement,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    majority,
    verifier_pass,
    verifier_precision_recall,
)
from console.review.services import review_assign, review_label, review_queue_create
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.flags import REVIEWED_HACK


def test_cohen_kappa_by_hand():
    # 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no 15: p_o = 35/50 = 0.7;
    # rater a says yes 25/50, b 30/50: p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # 4 items: a = h c h h, b = h c c h: p_o = 3/4; a: h 3/4, c 1/4; b: h 1/2, c 1/2;
    # p_e = 3/8 + 1/8 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 0.5
    assert cohen_kappa(["h", "c", "h", "h"], ["h", "c", "c", "h"]) == pytest.approx(0.5)
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)  # p_o 0, p_e 1/2
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None  # p_e = 1: undefined
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa(["a"], ["a", "b"])


def test_fleiss_kappa_by_hand_and_the_published_example():
    # 3 items, 3 raters, 2 categories: [3,0], [0,3], [2,1]. P_i = 1, 1, (4 + 1 - 3) / 6 = 1/3;
    # P_bar = 7/9; p = (5/9, 4/9); P_e = 25/81 + 16/81 = 41/81;
    # kappa = (63/81 - 41/81) / (40/81) = 22/40 = 0.55
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1]]) == pytest.approx(0.55)
    # Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories:
    # P_bar 0.378, P_e 0.213, kappa 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-4)
    # two raters: Fleiss' kappa is Scott's pi, here = (3/4 - 17/32) / (15/32) = 7/15
    # for h c h h / h c c h
    assert fleiss_kappa([[2, 0], [0, 2], [1, 1], [2, 0]]) == pytest.approx(7 / 15)
    assert fleiss_kappa([[2, 0], [2, 0]]) is None
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 2]])


def test_krippendorff_alpha_by_hand_and_the_package_example():
    # 2 raters, 4 units: (a,a) (b,b) (a,b) (a,a). Coincidences: o_aa = 4, o_bb = 2, o_ab = o_ba = 1;
    # n_a = 5, n_b = 3, n = 8;
    # alpha = 1 - (n - 1) * (o_ab + o_ba) / (2 n_a n_b) = 1 - 7 * 2 / 30 = 16/30
    units = [
        {"r1": "a", "r2": "a"},
        {"r1": "b", "r2": "b"},
        {"r1": "a", "r2": "b"},
        {"r1": "a", "r2": "a"},
    ]
    assert krippendorff_alpha(units) == pytest.approx(16 / 30)
    # the krippendorff package's docstring example (3 coders, 15 units, missing values):
    # nominal 0.691358
    rows = [
        [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
        [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
        [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
    ]
    units = [
        {coder: f"v{row[u]}" for coder, row in enumerate(rows) if row[u] is not None}
        for u in range(15)
    ]
    assert krippendorff_alpha(units) == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha([{"r1": "a", "r2": "a"}]) is None  # one value: undefined
    assert krippendorff_alpha([{"r1": "a"}, {"r2": "b"}]) is None  # nothing pairable


def test_agreement_report_over_items():
    units = {
        1: {"ann": m.CORRECT, "ben": m.CORRECT},
        2: {"ann": m.REWARD_HACK, "ben": m.REWARD_HACK},
        3: {"ann": m.CORRECT, "ben": m.REWARD_HACK},
        4: {"ann": m.CORRECT, "ben": m.CORRECT},
        5: {"ann": m.OTHER},
    }
    report = agreement(units)
    assert report["items"] == 5 and report["multi_labelled"] == 4
    assert report["observed"] == pytest.approx(3 / 4)
    # ann c h c c, ben c h h c: p_o 3/4; ann c 3/4 h 1/4, ben c 1/2 h 1/2; p_e = 3/8 + 1/8;
    # kappa 0.5
    assert report["cohen"] == [{"a": "ann", "b": "ben", "items": 4, "kappa": pytest.approx(0.5)}]
    assert report["fleiss"]["items"] == 4 and report["fleiss"]["kappa"] == pytest.approx(7 / 15)
    assert report["alpha"] == pytest.approx(16 / 30)


def test_majority_and_verifier_pass():
    assert majority([m.CORRECT, m.CORRECT, m.REWARD_HACK]) == m.CORRECT
    assert majority([m.CORRECT, m.REWARD_HACK]) is None
    assert majority([]) is None
    assert verifier_pass(reward=1.0, tests_passed=3, tests_total=4, flags=[])
    assert verifier_pass(
        reward=0.8, tests_passed=4, tests_total=4, flags=[]
    )  # every hidden test passed
    assert not verifier_pass(reward=1.0, tests_passed=4, tests_total=4, flags=["early_exit"])
    assert verifier_pass(
        reward=1.0, tests_passed=4, tests_total=4, flags=[REVIEWED_HACK]
    )  # review's own flag
    assert not verifier_pass(reward=0.75, tests_passed=3, tests_total=4, flags=[])


def test_precision_and_recall_by_hand():
    rows = (
        [(True, m.CORRECT)] * 3
        + [(True, m.REWARD_HACK)]
        + [(False, m.CORRECT)] * 2
        + [(False, m.BROKEN_TASK)] * 4
        + [(True, m.AMBIGUOUS_TASK), (False, None)]
    )
    got = verifier_precision_recall(rows)
    # tp 3, fp 1, fn 2, tn 4: precision 3/4, recall 3/5; ambiguous and no-majority left out
    assert got == {
        "tp": 3,
        "fp": 1,
        "fn": 2,
        "tn": 4,
        "excluded": 2,
        "labelled": 10,
        "precision": 0.75,
        "recall": 0.6,
    }
    empty = verifier_precision_recall([])
    assert empty["precision"] is None and empty["recall"] is None


@pytest.mark.django_db
def test_run_summary_page_shows_the_figures(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=2)
    t = seed_trajectories(
        run,
        versions,
        [
            {"reward": 1.0},
            {"reward": 1.0},
            {"reward": 1.0, "version": 1},
            {"reward": 0.0},
            {"reward": 0.25, "version": 1},
        ],
    )
    cora, ann, ben = (
        make_user("cora", "curator"),
        make_user("ann", "reviewer"),
        make_user("ben", "reviewer"),
    )
    queue = review_queue_create(
        name="pair",
        run_id=run.pk,
        strategy=m.STRATIFIED_TASK,
        size=5,
        reviewers_per_item=2,
        reviewers=[ann, ben],
        created_by=cora,
        seed=1,
    )
    items = {i.trajectory_id: i for i in queue.items.all()}
    # (ann, ben) per trajectory: t0 both correct (pass, tp); t1 hack/hack (pass, fp);
    # t2 correct/hack (no majority); t3 correct/correct (fail, fn); t4 broken/broken (fail, tn)
    plan = [
        (m.CORRECT, m.CORRECT),
        (m.REWARD_HACK, m.REWARD_HACK),
        (m.CORRECT, m.REWARD_HACK),
        (m.CORRECT, m.CORRECT),
        (m.BROKEN_TASK, m.BROKEN_TASK),
    ]
    for trajectory, (a, b) in zip(t, plan):
        for user, value in ((ann, a), (ben, b)):
            review_label(
                item_id=items[trajectory.pk].pk,
                reviewer=user,
                label=value,
                note="" if value == m.CORRECT else "why",
            )
    # a third reviewer on one item: items then hold 2 or 3 labels; Fleiss takes the 4 items with 2
    cat = make_user("cat", "reviewer")
    review_assign(item_id=items[t[0].pk].pk, reviewer=cat, assigned_by=cora)
    review_label(item_id=items[t[0].pk].pk, reviewer=cat, label=m.CORRECT, note="")

    client = Client()
    client.force_login(make_user("vic", "viewer"))
    page = client.get(f"/runs/{run.pk}/review/")
    assert page.status_code == 200
    summary = page.context["summary"]
    v = summary["verifier"]
    assert (v["tp"], v["fp"], v["fn"], v["tn"], v["excluded"]) == (1, 1, 1, 1, 1)
    assert v["precision"] == 0.5 and v["recall"] == 0.5
    assert dict((name, n) for name, _, n in summary["by_kind"]) == {
        m.CORRECT: 6,
        m.REWARD_HACK: 3,
        m.BROKEN_TASK: 2,
        m.AMBIGUOUS_TASK: 0,
        m.OTHER: 0,
    }
    a = summary["agreement"]
    # ann c h c c b, ben c h h c b over 5 items: p_o 4/5;
    # ann c 3/5 h 1/5 b 1/5, ben c 2/5 h 2/5 b 1/5; p_e = 6/25 + 2/25 + 1/25 = 9/25;
    # kappa = (20/25 - 9/25) / (16/25) = 11/16
    ann_ben = next(c for c in a["cohen"] if (c["a"], c["b"]) == ("ann", "ben"))
    assert ann_ben["items"] == 5 and ann_ben["kappa"] == pytest.approx(11 / 16)
    assert a["fleiss"]["items"] == 4 and a["fleiss"]["labels_per_item"] == 2
    html = page.content.decode()
    for fragment in (
        'id="precision">0.500',
        'id="recall">0.500',
        'id="tp">1',
        'id="fp">1',
        "0.688",
    ):
        assert fragment in html, fragment
    assert not math.isnan(a["alpha"])
