"""The trajectory replay page, the trajectory lists and their JSON API, read without signing in:
every part of a seeded trajectory is on its page, filters and sorting work, other runs' trajectories
are 404, the queries per page are bounded, the turns endpoint pages with diffs across chunk
edges."""

import json
import re
from html import unescape

import pytest
from django.test import Client

from sandboxes.result import FAILED, TIMEOUT
from tests.console.replay_seed import seed_group, seed_trajectory, seeded_run, turn_code
from training.models import Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(humaneval):
    """Run A: a flagged group of 3 at step 2 and an assortment of others; run B: one trajectory."""
    run, versions = seeded_run(humaneval)
    other, _ = seeded_run(humaneval, name="replay-other")
    group = seed_group(run, versions[0], step=2, group=0, size=3, turns=4)
    extra = [
        seed_trajectory(
            run, versions[1], step=1, group=0, index=0, reward=0.1, status=FAILED, turns=1
        ),
        seed_trajectory(
            run,
            versions[1],
            step=3,
            group=1,
            index=0,
            reward=0.9,
            turns=1,
            flags=["rollout_timeout"],
            status=TIMEOUT,
        ),
        seed_trajectory(run, versions[0], step=4, group=0, index=0, reward=0.6, turns=2),
    ]
    foreign = seed_trajectory(other, versions[0], step=1, reward=0.7, turns=2)
    return {
        "run": run,
        "other": other,
        "group": group,
        "extra": extra,
        "foreign": foreign,
        "versions": versions,
    }


def first_chunk(html: str) -> dict:
    match = re.search(
        r'<script id="first-chunk" type="application/json">(.*?)</script>', html, re.S
    )
    assert match, "the first chunk of turns is not embedded"
    return json.loads(match.group(1))


def test_replay_page_shows_every_part_of_a_trajectory(seeded):
    run, flagged = seeded["run"], seeded["group"][0]
    response = Client().get(f"/runs/{run.pk}/trajectories/{flagged.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    text = unescape(html)
    # header: task link to the library page, step, group, index, status, reward, components,
    # advantage, tests
    assert f'href="/tasks/HumanEval/0/?v={flagged.task_version.number}"' in html
    assert re.search(r'id="fact-step">2<', html) and re.search(r'id="fact-group">0<', html)
    assert re.search(r'id="fact-index">0<', html)
    assert (
        'id="fact-reward" class="big">1.0000<' in html
        and 'id="fact-advantage" class="pos">0.7500<' in html
    )
    assert "correctness" in html and "efficiency" in html and "0.2500" in html
    assert 'id="fact-tests">2/3 passed<' in html and 'id="fact-turns">4<' in html
    assert 'id="trajectory-status">ok<' in html
    # flags with their evidence, monitor scores with reasons
    flags = html[html.index('id="flags"') : html.index('id="monitor-scores"')]
    assert (
        "test_tampering" in flags
        and '"snippet": "sys.exit(0)"' in unescape(flags)
        and "conftest.py" in flags
    )
    monitors = html[html.index('id="monitor-scores"') : html.index('id="group-nav"')]
    assert monitors.index("rules") < monitors.index("llm:tiny")  # most suspicious first
    assert (
        "0.920" in monitors
        and "exits before the checker reports" in monitors
        and "looks plausible" in monitors
    )
    # group navigation (n/p), keys help, turn index and one section per turn
    assert 'id="prev-trajectory"' not in html
    assert (
        'id="next-trajectory" class="step-link" '
        f'href="/runs/{run.pk}/trajectories/{seeded["group"][1].pk}/"'
    ) in html
    assert (
        "next/previous trajectory in the group" in text
        and "<kbd>j</kbd>" in html
        and "<kbd>g</kbd>" in html
    )
    for n in range(1, 5):
        assert f'href="#turn-{n}"' in html and f'id="turn-{n}"' in html
    assert 'id="turn-5"' not in html
    # the turns: policy text, action, code, diff from the previous turn, sandbox result, observation
    chunk = first_chunk(html)
    assert chunk["count"] == 4 and chunk["offset"] == 0 and len(chunk["results"]) == 4
    t0, t1 = chunk["results"][0], chunk["results"][1]
    assert t0["diff"] == [] and t0["code"] == turn_code(0)
    assert ["del", "-    # attempt 0"] in t1["diff"] and ["add", "+    # attempt 1"] in t1["diff"]
    assert ["del", "-            if i != j and abs(a - b) <= threshold:"] in t1["diff"]
    assert ["add", "+            if i != j and abs(a - b) < threshold:"] in t1["diff"]
    assert t1["diff"][0][0] == "head" and any(kind == "hunk" for kind, _ in t1["diff"])
    assert t1["policy_text"].startswith("Turn 2:") and t1["action"] == "run_code"
    assert t1["observation"] == "Visible tests after turn 2: 2/3 passed"
    result = t1["sandbox_result"]
    assert result["status"] == "failed" and result["exit_code"] == 1 and result["signal"] is None
    assert (
        result["wall_ms"] == 121.5
        and result["peak_memory_bytes"] == 12_345_678
        and "Traceback" in result["stderr"]
    )
    assert [t["passed"] for t in result["tests"]] == [True, False, True]
    assert chunk["results"][2]["sandbox_result"]["truncated"] is True
    assert t1["sampled_tokens"] == 40 and t1["observation_tokens"] == 12
    assert "token_ids" not in t1 and "logprobs" not in t1
    assert 'src="/static/console/replay.js"' in html


def test_last_trajectory_of_a_group_links_back_and_pages_are_404_across_runs(seeded):
    run, other, group, foreign = seeded["run"], seeded["other"], seeded["group"], seeded["foreign"]
    client = Client()
    html = client.get(f"/runs/{run.pk}/trajectories/{group[2].pk}/").content.decode()
    assert (
        f'id="prev-trajectory" class="step-link" href="/runs/{run.pk}/trajectories/{group[1].pk}/"'
        in html
    )
    assert 'id="next-trajectory"' not in html
    # a trajectory of another run, through this run's URL: page, detail API and turns API are 404
    assert client.get(f"/runs/{run.pk}/trajectories/{foreign.pk}/").status_code == 404
    assert client.get(f"/api/runs/{run.pk}/trajectories/{foreign.pk}/").status_code == 404
    assert client.get(f"/api/runs/{run.pk}/trajectories/{foreign.pk}/turns/").status_code == 404
    assert client.get(f"/runs/{other.pk}/trajectories/{foreign.pk}/").status_code == 200
    assert client.get(f"/runs/{run.pk}/trajectories/999999/").status_code == 404
    assert client.get("/runs/999999/trajectories/").status_code == 404
    assert client.get("/api/runs/999999/trajectories/").status_code == 404


def test_turns_endpoint_pages_and_diffs_across_chunk_edges(seeded):
    run, versions = seeded["run"], seeded["versions"]
    long = seed_trajectory(run, versions[0], step=5, turns=60)
    client = Client()
    url = f"/api/runs/{run.pk}/trajectories/{long.pk}/turns/"
    page = client.get(url).json()
    assert page["count"] == 60 and len(page["results"]) == 25
    assert [t["index"] for t in page["results"]] == list(range(25))
    assert "offset=25" in page["next"] and page["previous"] is None
    page = client.get(url, {"offset": 25, "limit": 10}).json()
    assert [t["index"] for t in page["results"]] == list(range(25, 35))
    # the first turn of a chunk is diffed against the last turn of the one before
    first = page["results"][0]
    assert ["del", "-    # attempt 24"] in first["diff"] and ["add", "+    # attempt 25"] in first[
        "diff"
    ]
    page = client.get(url, {"offset": 55, "limit": 10}).json()
    assert [t["index"] for t in page["results"]] == list(range(55, 60)) and page["next"] is None
    assert len(client.get(url, {"limit": 1000}).json()["results"]) == 60  # capped at 200
    # the API schema documents the endpoints
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    turns = paths["/api/runs/{run_id}/trajectories/{id}/turns/"]["get"]
    assert {p["name"] for p in turns["parameters"]} >= {"offset", "limit", "run_id", "id"}
    assert {
        "/api/trajectories/",
        "/api/runs/{run_id}/trajectories/",
        "/api/runs/{run_id}/trajectories/{id}/",
    } <= set(paths)


def ids(response) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-id="(\d+)">', response.content.decode())]


def test_list_filters_and_sorts(seeded):
    run, group, extra, foreign = seeded["run"], seeded["group"], seeded["extra"], seeded["foreign"]
    client = Client()
    base = f"/runs/{run.pk}/trajectories/"
    every = ids(client.get(base))
    assert every == [
        extra[0].pk,
        *[t.pk for t in group],
        extra[1].pk,
        extra[2].pk,
    ]  # by step, group, index
    assert foreign.pk not in every
    assert ids(client.get(base, {"step_min": 2, "step_max": 3})) == [
        *[t.pk for t in group],
        extra[1].pk,
    ]
    assert ids(client.get(base, {"task": "humaneval/1"})) == [extra[0].pk, extra[1].pk]
    assert ids(client.get(base, {"reward_min": 0.5, "reward_max": 0.95})) == [
        extra[1].pk,
        extra[2].pk,
    ]
    assert ids(client.get(base, {"flag": "any"})) == [group[0].pk, extra[1].pk]
    assert ids(client.get(base, {"flag": "test_tampering"})) == [group[0].pk]
    assert ids(client.get(base, {"flag": "rollout_timeout"})) == [extra[1].pk]
    assert ids(client.get(base, {"flag": "none"})) == [
        extra[0].pk,
        group[1].pk,
        group[2].pk,
        extra[2].pk,
    ]
    assert ids(client.get(base, {"status": "failed"})) == [extra[0].pk]
    rewards = {t.pk: t.reward for t in Trajectory.objects.filter(run=run)}
    by_reward = ids(client.get(base, {"sort": "-reward"}))
    assert [rewards[i] for i in by_reward] == sorted(rewards.values(), reverse=True)
    assert ids(client.get(base, {"sort": "reward"})) == list(reversed(by_reward))
    assert ids(client.get(base, {"sort": "-step", "step_max": 1})) == [extra[0].pk]
    # every row links to its replay; the sort link keeps the filters
    page = client.get(base, {"task": "HumanEval/1", "sort": "step"}).content.decode()
    assert f'href="/runs/{run.pk}/trajectories/{extra[0].pk}/"' in page
    assert 'id="sort-reward" href="?task=HumanEval%2F1&amp;sort=-reward"' in page
    # bad input is reported, not a 500
    bad = client.get(base, {"reward_min": "lots", "status": "nonsense"})
    assert bad.status_code == 200 and "form-errors" in bad.content.decode() and ids(bad) == []
    # across runs, with the run filter; the JSON list takes the same filters
    across = ids(client.get("/trajectories/"))
    assert set(across) == set(rewards) | {foreign.pk} and across == sorted(
        across, reverse=True
    )  # newest first
    assert ids(client.get("/trajectories/", {"run": seeded["other"].pk})) == [foreign.pk]
    api = client.get("/api/trajectories/", {"flag": "any", "sort": "-reward"}).json()
    assert [t["id"] for t in api["results"]] == [group[0].pk, extra[1].pk] and api["count"] == 2
    assert api["results"][0]["task_id"] == "HumanEval/0" and api["results"][0]["turn_count"] == 4
    assert api["results"][0]["monitor_max"] == 0.92
    assert (
        client.get(f"/api/runs/{run.pk}/trajectories/", {"status": "nonsense"}).status_code == 400
    )
    detail = client.get(f"/api/runs/{run.pk}/trajectories/{group[0].pk}/").json()
    assert detail["flag_evidence"]["test_tampering"]["file"] == "conftest.py"
    assert [m["monitor"] for m in detail["monitor_scores"]] == ["rules", "llm:tiny"]
    # the run page links here
    assert f'href="/runs/{run.pk}/trajectories/"' in client.get(f"/runs/{run.pk}/").content.decode()


def test_pages_use_a_bounded_number_of_queries(seeded, django_assert_max_num_queries):
    run, versions = seeded["run"], seeded["versions"]
    for step in range(10, 16):
        seed_group(
            run, versions[step % 2], step=step, size=20, turns=2
        )  # 120 more, with monitor scores
    long = seed_trajectory(run, versions[0], step=20, turns=300)
    client = Client()
    # the run, the count, the page (turn counts and monitor maxima are subqueries of it)
    with django_assert_max_num_queries(3):
        first = client.get(f"/runs/{run.pk}/trajectories/", {"flag": "none", "sort": "-reward"})
    assert len(ids(first)) == 50 and "page 1 of 3" in first.content.decode()
    with django_assert_max_num_queries(3):
        last = client.get(
            f"/runs/{run.pk}/trajectories/", {"flag": "none", "sort": "-reward", "page": 3}
        )
    assert len(ids(last)) == 4 + 114 + 1 - 100  # seeded, added, the long one; all unflagged
    with django_assert_max_num_queries(2):
        client.get("/trajectories/", {"task": "HumanEval"})
    # trajectory, monitor scores, group, turn index, first chunk: not one per turn
    with django_assert_max_num_queries(5):
        page = client.get(f"/runs/{run.pk}/trajectories/{long.pk}/")
    assert page.status_code == 200 and len(first_chunk(page.content.decode())["results"]) == 25
    # trajectory check, count, the chunk, the code of the turn before it
    with django_assert_max_num_queries(4):
        chunk = client.get(
            f"/api/runs/{run.pk}/trajectories/{long.pk}/turns/", {"offset": 275, "limit": 25}
        )
    assert [t["index"] for t in chunk.json()["results"]] == list(range(275, 300))
