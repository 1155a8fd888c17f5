"""Personal API keys against every role: made and revoked in the console (shown once, stored as a
digest), sent as a bearer token to the REST API (reads; writes within the key's scope and its
owner's role) and to the websocket (reading); expired, revoked and forged keys answer 401 with a
challenge."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.apikeys import api_key_create, scopes_for
from console.asgi import application
from console.models import ApiKey
from console.review import models as m
from core.errors import InputError
from tasks_library.models import TaskVersion
from tests.console.test_roles_matrix import USERNAMES, world  # noqa: F401 (fixture)
from training.models import TrainingRun

pytestmark = pytest.mark.django_db

# What each role may give a key, and which scopes each write of the test needs.
SCOPES = {
    "admin": ["read", "curators", "operators", "reviewers"],
    "curator": ["read", "curators"],
    "operator": ["read", "operators"],
    "reviewer": ["read", "reviewers"],
    "viewer": ["read"],
}
WRITES = {
    "rename run": {"curators", "operators"},
    "quarantine": {"curators"},
    "label": {"curators", "reviewers"},
}


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def write(client: APIClient, name: str, world, tag: str):
    if name == "rename run":
        return client.patch(f"/api/runs/{world.run.pk}/", {"name": tag}, format="json")
    if name == "quarantine":
        return client.post(
            "/api/task-versions/quarantine/",
            {"ids": [world.versions[0].pk], "reason": tag},
            format="json",
        )
    return client.post(
        f"/api/review/items/{world.item.pk}/label/",
        {"label": m.CORRECT, "note": tag},
        format="json",
    )


def written(name: str, world, tag: str) -> bool:
    if name == "rename run":
        return TrainingRun.objects.get(pk=world.run.pk).name == tag
    if name == "quarantine":
        return TaskVersion.objects.get(pk=world.versions[0].pk).quarantine_reason == tag
    return m.ReviewLabel.objects.filter(item=world.item, note=tag).exists()


@pytest.mark.parametrize("role", list(SCOPES))
def test_each_role_gets_its_scopes_and_each_key_writes_exactly_its_scope(role, world):
    user = world.users[role]
    assert scopes_for(user) == SCOPES[role]
    for scope in {"read", "curators", "operators", "reviewers"} - set(SCOPES[role]):
        with pytest.raises(InputError, match="scope: .* is not one you may give"):
            api_key_create(user=user, name="x", scope=scope, days=30)
    for scope in SCOPES[role]:
        record, key = api_key_create(user=user, name=f"{role} {scope}", scope=scope, days=30)
        assert key.startswith(f"crk_{record.key_id}_") and len(key) == 60
        assert record.digest == hashlib.sha256(key.encode()).hexdigest()
        assert key not in json.dumps(list(ApiKey.objects.values()), default=str)
        client = bearer(key)
        assert client.get("/api/runs/").status_code == 200
        assert client.get(f"/api/runs/{world.run.pk}/trajectories/").status_code == 200
        for name, needs in WRITES.items():
            tag = f"{role}-{scope}-{name}"
            response = write(client, name, world, tag)
            if scope in needs:
                assert response.status_code == 200, (scope, name, response.content)
                assert written(name, world, tag), (scope, name)
            else:
                assert response.status_code == 403, (scope, name, response.status_code)
                assert not written(name, world, tag), (scope, name)
                if scope == "read":
                    assert "scope 'read'" in response.json()["detail"]


def test_a_superusers_role_key_is_not_a_superuser(world):
    _, key = api_key_create(user=world.users["admin"], name="ops", scope="operators", days=1)
    # An operator's key may rename but never quarantine, although its owner may.
    assert write(bearer(key), "quarantine", world, "no").status_code == 403
    assert write(bearer(key), "rename run", world, "yes").status_code == 200


def test_expired_revoked_and_forged_keys_answer_401_with_a_challenge(world):
    user = world.users["operator"]
    record, key = api_key_create(user=user, name="ci", scope="operators", days=1)
    assert bearer(key).get("/api/runs/").status_code == 200
    ApiKey.objects.filter(pk=record.pk).update(last_used_at=None)
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for token, says in [
        (forged, "unknown API key"),
        ("crk_nothex", "not a Crucible API key"),
    ]:
        response = bearer(token).get("/api/runs/")
        assert response.status_code == 401 and says in response.json()["detail"]
        assert response["WWW-Authenticate"] == 'Bearer realm="crucible"'
    ApiKey.objects.filter(pk=record.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(key).get("/api/runs/")
    assert response.status_code == 401 and "expired" in response.json()["detail"]
    ApiKey.objects.filter(pk=record.pk).update(expires_at=timezone.now() + timedelta(days=1))
    assert bearer(key).get("/api/runs/").status_code == 200
    assert ApiKey.objects.get(pk=record.pk).last_used_at is not None
    Client().force_login(user)
    page = Client()
    page.force_login(user)
    assert page.post(f"/account/api-keys/{record.pk}/revoke/").status_code == 302
    response = bearer(key).get("/api/runs/")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_the_console_page_makes_a_key_shows_it_once_and_revokes_it(world):
    page = Client()
    page.force_login(world.users["curator"])
    assert page.get("/account/api-keys/").status_code == 200
    made = page.post("/account/api-keys/", {"name": "nightly", "scope": "curators", "days": 7})
    assert made.status_code == 200 and made["Cache-Control"].startswith("max-age=0")
    key = re.search(r'<pre id="new-key-value">(crk_[^<]+)</pre>', made.content.decode()).group(1)
    assert bearer(key).get("/api/task-versions/").status_code == 200
    again = page.get("/account/api-keys/").content.decode()
    assert key not in again and "nightly" in again and "crk_" in again
    # Another user may not revoke it; bad input is refused on its field.
    other = Client()
    other.force_login(world.users["operator"])
    record = ApiKey.objects.get(name="nightly")
    other.post(f"/account/api-keys/{record.pk}/revoke/")
    assert ApiKey.objects.get(pk=record.pk).revoked_at is None
    bad = page.post("/account/api-keys/", {"name": "x", "scope": "operators", "days": 9999})
    assert bad.status_code == 400
    body = bad.content.decode()
    assert 'id="errors-scope"' in body and 'id="errors-days"' in body
    assert ApiKey.objects.count() == 1
    assert Client().get("/account/api-keys/").status_code == 302  # signed out: to the login


def _subscribe(run_id: int, key: str | None) -> tuple[str, object]:
    headers = [(b"origin", b"http://127.0.0.1")]
    if key:
        headers.append((b"authorization", f"Bearer {key}".encode()))

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
        connected, code = await communicator.connect(timeout=10)
        message = await communicator.receive_output(timeout=10)
        await communicator.disconnect()
        if message["type"] == "websocket.close":
            return "closed", message.get("code")
        return "events", json.loads(message["text"])["kind"]

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_the_websocket_reads_with_a_key_while_the_console_is_private(world, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    _, key = api_key_create(user=world.users["viewer"], name="watch", scope="read", days=1)
    assert _subscribe(world.run.pk, None) == ("closed", 4403)
    assert _subscribe(world.run.pk, "crk_000000000000_" + "A" * 43) == ("closed", 4403)
    assert _subscribe(world.run.pk, key) == ("events", "status")


def test_usernames_cover_every_role():
    assert set(USERNAMES) == set(SCOPES)
