"""Agreement between reviewers, and of the verifier with the reviewers.

Between reviewers (nominal labels):

* :func:`cohen_kappa` for two reviewers over the items both labelled;
* :func:`fleiss_kappa` for more, over items that each got the same number of labels;
* :func:`krippendorff_alpha` for any number of reviewers with missing labels, computed by the
  ``krippendorff`` package (nominal level).

Between the verifier and the reviewers (:func:`verifier_precision_recall`): the reviewers'
majority label is the ground truth (``correct`` positive; ``reward_hack`` and ``broken_task``
negative; ``ambiguous_task``, ``other`` and ties are left out and counted), the verifier's
verdict is a pass (:func:`verifier_pass`). Precision: of the trajectories the verifier passed,
the share the reviewers found correct. Recall: of those the reviewers found correct, the share
the verifier passed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

from console.review import models as m
from training.flags import REVIEWED_HACK

POSITIVE = (m.CORRECT,)
NEGATIVE = (m.REWARD_HACK, m.BROKEN_TASK)


def cohen_kappa(a: Sequence, b: Sequence) -> float | None:
    """Cohen's kappa of two raters' nominal labels of the same items.

    kappa = (p_o - p_e) / (1 - p_e), where p_o is the share of items the two agree on and
    p_e = sum_k p_a(k) p_b(k) the agreement expected by chance from each rater's label
    frequencies (Cohen, J. (1960). "A coefficient of agreement for nominal scales".
    Educational and Psychological Measurement 20(1): 37-46, eq. 1).

    Returns:
        kappa in [-1, 1]; None when undefined (no items, or p_e == 1: both raters gave one
        and the same label to everything).

    Raises:
        ValueError: ``a`` and ``b`` differ in length.
    """
    if len(a) != len(b):
        raise ValueError(
            f"cohen_kappa: {len(a)} labels against {len(b)}; give one label per item from each "
            "rater"
        )
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b)) / n
    count_a, count_b = Counter(a), Counter(b)
    p_e = sum(count_a[k] * count_b[k] for k in count_a) / (n * n)
    if p_e == 1:
        return None
    return (p_o - p_e) / (1 - p_e)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of N items, each labelled by the same number n >= 2 of raters (not
    necessarily the same raters), from ``counts[i][j]``: how many raters put item i in category j.

    With P_i = (sum_j n_ij^2 - n) / (n (n - 1)) the agreement on item i, P_bar their mean,
    p_j = sum_i n_ij / (N n) the share of labels in category j and P_e = sum_j p_j^2:
    kappa = (P_bar - P_e) / (1 - P_e) (Fleiss, J. L. (1971). "Measuring nominal scale agreement
    among many raters". Psychological Bulletin 76(5): 378-382, eqs. 2, 3, 6, 9).

    Returns:
        kappa; None when undefined (no items, or P_e == 1: every label in one category).

    Raises:
        ValueError: rows with different totals, or fewer than 2 raters per item.
    """
    if not counts:
        return None
    totals = {sum(row) for row in counts}
    if len(totals) != 1:
        raise ValueError(
            f"fleiss_kappa: every item needs the same number of labels, got totals {sorted(totals)}"
        )
    n = totals.pop()
    if n < 2:
        raise ValueError("fleiss_kappa: each item needs at least 2 labels")
    big_n = len(counts)
    p_bar = sum((sum(x * x for x in row) - n) / (n * (n - 1)) for row in counts) / big_n
    categories = len(counts[0])
    p_j = [sum(row[j] for row in counts) / (big_n * n) for j in range(categories)]
    p_e = sum(p * p for p in p_j)
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(units: Iterable[Mapping[object, str]]) -> float | None:
    """Krippendorff's alpha (nominal) of labels per unit: ``units`` is one ``{rater: label}`` per
    item; a rater missing from a unit did not label it. Computed by the ``krippendorff`` package
    (Krippendorff, K. (2011). "Computing Krippendorff's Alpha-Reliability"):
    alpha = 1 - D_o / D_e over the coincidence matrix of pairable labels.

    Returns:
        alpha; None when undefined (fewer than two pairable labels, or a single label value).
    """
    import krippendorff  # noqa: PLC0415 (with numpy: for alpha, not in every web process)
    import numpy as np  # noqa: PLC0415 (as krippendorff)

    units = [dict(u) for u in units]
    raters = sorted({r for u in units for r in u}, key=str)
    values = sorted({v for u in units for v in u.values()})
    pairable = sum(len(u) for u in units if len(u) >= 2)
    if len(values) < 2 or pairable < 2:
        return None
    index = {v: i for i, v in enumerate(values)}
    data = np.full((len(raters), len(units)), np.nan)
    for col, unit in enumerate(units):
        for row, rater in enumerate(raters):
            if rater in unit:
                data[row, col] = index[unit[rater]]
    return float(
        krippendorff.alpha(
            reliability_data=data,
            value_domain=list(range(len(values))),
            level_of_measurement="nominal",
        )
    )


def agreement(units: Mapping[object, Mapping[object, str]]) -> dict:
    """Reviewer agreement over items: ``units`` maps an item to ``{reviewer: label}``.

    Returns ``{"items", "multi_labelled", "observed", "cohen": [{"a", "b", "items", "kappa"}],
    "fleiss": {"kappa", "items", "labels_per_item"} | None, "alpha": float | None}``: ``observed``
    is the share of agreeing pairs of labels on the same item; Cohen's kappa per pair of reviewers
    who labelled items in common; Fleiss' kappa over the items with the most common number (>= 2)
    of labels; Krippendorff's alpha over every item.
    """
    multi = {item: dict(labels) for item, labels in units.items() if len(labels) >= 2}
    pairs = agree = 0
    for labels in multi.values():
        for x, y in combinations(labels.values(), 2):
            pairs += 1
            agree += x == y
    reviewers = sorted({r for labels in multi.values() for r in labels}, key=str)
    cohen = []
    for a, b in combinations(reviewers, 2):
        shared = [labels for labels in multi.values() if a in labels and b in labels]
        if shared:
            cohen.append(
                {
                    "a": a,
                    "b": b,
                    "items": len(shared),
                    "kappa": cohen_kappa([s[a] for s in shared], [s[b] for s in shared]),
                }
            )
    fleiss = None
    if multi:
        per_item = Counter(len(labels) for labels in multi.values()).most_common()
        n = max(per_item, key=lambda pair: (pair[1], pair[0]))[0]
        # Every label given counts as a category: a queue's own labels beside the built-in ones.
        categories = sorted({value for labels in multi.values() for value in labels.values()})
        rows = [
            [Counter(labels.values())[k] for k in categories]
            for labels in multi.values()
            if len(labels) == n
        ]
        fleiss = {"kappa": fleiss_kappa(rows), "items": len(rows), "labels_per_item": n}
    return {
        "items": len(units),
        "multi_labelled": len(multi),
        "observed": agree / pairs if pairs else None,
        "cohen": cohen,
        "fleiss": fleiss,
        "alpha": krippendorff_alpha(multi.values()),
    }


def verifier_pass(
    *, reward: float, tests_passed: int, tests_total: int, flags: Iterable[str]
) -> bool:
    """The verifier's verdict on a trajectory: a pass when its reward is 1 or every hidden test
    passed, and no detector flagged it (the review's own ``reviewed_hack`` flag does not count)."""
    all_tests = tests_total > 0 and tests_passed == tests_total
    flagged = any(flag != REVIEWED_HACK for flag in flags)
    return (reward >= 1.0 - 1e-9 or all_tests) and not flagged


def majority(labels: Iterable[str]) -> str | None:
    """The label most reviewers gave; None on a tie for the most (or no labels)."""
    ranked = Counter(labels).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def verifier_precision_recall(rows: Iterable[tuple[bool, str | None]]) -> dict:
    """Precision and recall of the verifier against the reviewers' majority.

    ``rows`` holds ``(verifier passed, majority label)`` per labelled trajectory. Returns counts
    ``tp`` (passed, correct), ``fp`` (passed, hack or broken), ``fn`` (failed, correct), ``tn``
    (failed, hack or broken), ``excluded`` (ambiguous, other or no majority), and
    ``precision = tp / (tp + fp)``, ``recall = tp / (tp + fn)`` (None when the denominator is 0).
    """
    counts = Counter()
    for passed, label in rows:
        if label in POSITIVE:
            counts["tp" if passed else "fn"] += 1
        elif label in NEGATIVE:
            counts["fp" if passed else "tn"] += 1
        else:
            counts["excluded"] += 1
    tp, fp, fn, tn = counts["tp"], counts["fp"], counts["fn"], counts["tn"]
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "excluded": counts["excluded"],
        "labelled": tp + fp + fn + tn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }
