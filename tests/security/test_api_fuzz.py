"""The REST API fuzzed from its own OpenAPI schema (schemathesis, through the WSGI app in this
process): every operation, a bounded number of generated requests each, signed in with a
superuser's curators-scoped API key over a small library. No request may give a server error,
and every answer must match the schema (status code documented, body and content type as
described)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.renderers import JSONRenderer
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from console.apikeys import api_key_create
from tasks_library.tasks import validate_task_versions
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.tasks import run_cancel_task, run_launch

EXAMPLES = 12  # per operation: ~40 operations, a few seconds each

# Requests that fit the schema (the refusal of those that do not is the bounds' and the roles'
# tests' business), at most EXAMPLES per operation, the same ones on every run.
CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {
            "mode": "positive",
            "max-examples": EXAMPLES,
            "deterministic": True,
            "database": "none",
        }
    }
)
schema = schemathesis.openapi.from_dict(
    json.loads(JSONRenderer().render(SchemaGenerator().get_schema(request=None, public=True))),
    config=CONFIG,
)
schema.app = get_wsgi_application()


@pytest.fixture
def wsgi_in_test_transaction():
    """As Django's test client does: a request must not close the connection that holds the
    test's transaction (the WSGI handler closes old connections when a request starts and
    ends)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_key(humaneval, monkeypatch, settings, wsgi_in_test_transaction):
    """A superuser's key over a run with trajectories, a library and a review queue; Celery's
    queueing recorded instead of sent (no worker runs the fuzzed launches)."""
    # Private, as production is by default: every operation then needs the key (schemathesis
    # checks that an operation refuses a request without it).
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    make_roles()
    admin = make_user("ada", "admin")
    run, versions = seed_run(humaneval, tasks=2)
    seed_trajectories(run, versions, [{"reward": 1.0}, {"reward": 0.0}])
    for task in (run_cancel_task, run_launch):
        monkeypatch.setattr(task, "delay", lambda *a, **k: None)
    monkeypatch.setattr(
        validate_task_versions, "delay", lambda *a, **k: SimpleNamespace(id="fuzzed")
    )
    _, key = api_key_create(user=admin, name="fuzz", scope="curators", days=1)
    return key


@pytest.mark.django_db
@schema.parametrize()
@hypothesis_settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api(case, api_key):
    # Every check but the one that wants each schema-valid request accepted: a valid request may
    # still name a task set or a version that does not exist, which is a 400 by design.
    case.call_and_validate(
        headers={"Authorization": f"Bearer {api_key}"},
        excluded_checks=[positive_data_acceptance],
    )
