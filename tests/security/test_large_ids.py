"""Ids of 2**63 and more (past every database's signed 64-bit integer) never give a server
error: in a URL, a query parameter or a JSON body, anonymously and as a superuser."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

HUGE = 2**63
HUGER = 10**30


def _patterns(resolver=None, prefix: str = ""):
    """Every route of the project as (route string, name), includes flattened."""
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield route, entry.name


def _with_ids(route: str, value: int) -> str | None:
    """``route`` with every int argument set to ``value`` (None when it has none); other
    arguments get plausible text."""
    if not re.search(r"<(int|id):", route) or route.startswith("admin/") or route.startswith("^"):
        return None
    route = re.sub(r"<(int|id):\w+>", str(value), route)
    route = re.sub(r"<path:\w+>", "HumanEval/0", route)
    return "/" + re.sub(r"<(str:)?\w+>", "lib", route)


def _routes():
    routes = {r for route, _ in _patterns() if (r := _with_ids(route, HUGE))}
    assert len(routes) >= 30, routes  # the whole console, not an empty walk
    return sorted(routes)


@pytest.fixture
def admin_client(db) -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root2", "r@x.org", "pw"))
    client.force_login(User.objects.get(username="root2"))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("route", _routes())
def test_huge_ids_in_every_url(route, admin_client):
    for client in (admin_client, APIClient()):
        for method in ("get", "post", "patch"):
            response = getattr(client, method)(route, {}, format="json")
            assert response.status_code < 500, (method, route, response.status_code)
            if client is admin_client and method == "get":
                assert response.status_code in (400, 404, 405), (route, response.status_code)


QUERIES = [
    "/api/trajectories/?run={}",
    "/trajectories/?run={}",
    "/api/trajectories/?step_min={}",
    "/trajectories/?step_max={}",
    "/api/runs/?page={}",
    "/api/runs/?page_size={}",
    "/api/task-versions/?page={}",
    "/api/tasks/HumanEval/0/diff/?old={}&new=1",
    "/tasks/HumanEval/0/?job={}",
    "/tasks/HumanEval/0/?version={}",
    "/tasks/HumanEval/0/?old={}&new=1",
    "/review/queues/new/?run={}",
    "/runs/compare/?run={}",
    "/api/runs/1/steps/?page={}",
    "/api/runs/1/trajectories/1/turns/?offset={}&limit={}",
]


@pytest.mark.django_db
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("value", [HUGE, HUGER, -HUGE])
def test_huge_ids_in_query_parameters(query, value, admin_client):
    url = query.format(value, value)
    for client in (admin_client, APIClient()):
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)


BODIES = [
    ("/api/task-versions/validate/", {"ids": [HUGE]}),
    ("/api/task-versions/quarantine/", {"ids": [HUGE], "reason": "x"}),
    ("/api/task-versions/approve/", {"ids": [HUGE], "reason": "x"}),
    ("/api/task-sets/lib/pin/", {"versions": [HUGE]}),
    ("/api/tasks/HumanEval/0/versions/", {"base": HUGE, "change_note": "x", "prompt": "y"}),
    ("/api/review/queues/", {"run": HUGE, "size": 5}),
    ("/api/review/queues/", {"run": 1, "size": HUGE, "seed": HUGE}),
    ("/api/runs/", {"task_set": "lib", "steps": HUGE}),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "body"), BODIES)
def test_huge_ids_in_json_bodies(url, body, admin_client):
    response = admin_client.post(url, body, format="json")
    assert response.status_code in (400, 404), (url, response.status_code, response.content[:300])
