"""Personal API keys: made and revoked in the console (``/account/api-keys/``), sent by scripts as
``Authorization: Bearer crk_<key id>_<secret>`` to the REST API and to the websockets (reading).

A key acts for its owner within its scope:

* ``read``: safe methods only (GET, HEAD, OPTIONS); any write answers 403 naming the scope;
* a role (``curators``, ``operators``, ``reviewers``): reads, and the writes of that role that
  the owner may do too (the owner's permissions intersected with the role group's; a superuser's
  key holds the role's, not every permission).

Only the SHA-256 digest of a key is stored: a key carries 256 random bits, so a slow password
hash would add nothing (as GitHub's tokens); the key is shown once, when it is made. A key
expires (1 to :data:`MAX_DAYS` days) and may be revoked at any time by its owner or a superuser.

Also here: the HTTP Basic authentication of the API (a subclass that lets django-axes see the
request) and the answer to a locked-out sign-in (:func:`lockout_response`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from datetime import timedelta

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser, Permission
from django.db import transaction
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS

from console.models import ApiKey
from core.access import CHALLENGE
from core.errors import InputError
from core.permissions import CURATORS, OPERATORS, REVIEWERS

log = logging.getLogger(__name__)

PREFIX = "crk_"  # "crucible key": secret scanners and people can tell it from other tokens
KEY_RE = re.compile(r"^crk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
MAX_DAYS = 365
DEFAULT_DAYS = 90
ROLE_SCOPES = {CURATORS, OPERATORS, REVIEWERS}
LAST_USED_EVERY = timedelta(minutes=1)  # one write a minute per key, not one per request


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def scopes_for(user) -> list[str]:
    """The scopes ``user`` may give a key: ``read``, and each role they hold (every role for a
    superuser)."""
    if user.is_superuser:
        roles = ROLE_SCOPES
    else:
        roles = ROLE_SCOPES & set(user.groups.values_list("name", flat=True))
    return [ApiKey.READ, *sorted(roles)]


def api_key_create(*, user, name: str, scope: str, days: int) -> tuple[ApiKey, str]:
    """Make a key for ``user``; return it and the key itself (shown once, never stored).

    Args:
        name: what the key is for, 1 to 100 characters.
        scope: ``read`` or a role ``user`` holds (:func:`scopes_for`).
        days: lifetime, 1 to :data:`MAX_DAYS`.

    Raises:
        InputError: (``name``, ``scope``, ``days``) naming what to fix.
    """
    name = (name or "").strip()
    if not 1 <= len(name) <= 100:
        raise InputError("name: say what the key is for, in 1 to 100 characters", field="name")
    allowed = scopes_for(user)
    if scope not in allowed:
        raise InputError(
            f"scope: {scope!r} is not one you may give; choose one of {', '.join(allowed)}",
            field="scope",
        )
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise InputError(f"days: a key lives 1 to {MAX_DAYS} days, got {days!r}", field="days")
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        record = ApiKey.objects.create(
            user=user,
            name=name,
            key_id=key_id,
            digest=_digest(key),
            scope=scope,
            expires_at=timezone.now() + timedelta(days=days),
        )
    log.info("API key %s (%s, scope %s) created for %s", key_id, name, scope, user)
    return record, key


def api_key_revoke(*, user, key_id: int) -> ApiKey:
    """Revoke key ``key_id`` (its row id) of ``user`` (any key, for a superuser); revoking twice
    is a no-op.

    Raises:
        InputError: (``key``) no such key of this user.
    """
    keys = ApiKey.objects.all() if user.is_superuser else ApiKey.objects.filter(user=user)
    with transaction.atomic():
        record = keys.select_for_update().filter(pk=key_id).first()
        if record is None:
            raise InputError(f"key: you have no API key {key_id}", field="key")
        if record.revoked_at is None:
            record.revoked_at = timezone.now()
            record.save(update_fields=["revoked_at"])
            log.info("API key %s (%s) revoked by %s", record.key_id, record.name, user)
    return record


def _scoped(user, key: ApiKey):
    """``user`` as seen through ``key``: Django's permission checks read the permissions cache
    that the model backend fills once per user object, so filling it first narrows every rule of
    :mod:`core.permissions` at once. The object is never saved."""
    if key.scope == ApiKey.READ:
        allowed = None  # writes are refused before any rule runs; reading keeps the owner's rights
    else:
        allowed = {
            f"{app}.{codename}"
            for app, codename in Permission.objects.filter(group__name=key.scope).values_list(
                "content_type__app_label", "codename"
            )
        }
    if allowed is not None:
        owner = allowed if user.is_superuser else allowed & user.get_all_permissions()
        user.is_superuser = False
        user._perm_cache = owner
    user.api_key = key
    return user


class KeyRefused(Exception):
    """A bearer token that is no valid key; the message says which way."""


def api_key_user(token: str):
    """The user a key acts for (narrowed to its scope), after checking it.

    Raises:
        KeyRefused: malformed, unknown, revoked or expired key, or an inactive owner.
    """
    match = KEY_RE.match(token.strip())
    if match is None:
        raise KeyRefused("not a Crucible API key (crk_<12 hex>_<43 characters>)")
    key = ApiKey.objects.select_related("user").filter(key_id=match.group(1)).first()
    if key is None or not hmac.compare_digest(key.digest, _digest(token.strip())):
        raise KeyRefused("unknown API key")
    if key.revoked_at is not None:
        raise KeyRefused(f"API key crk_{key.key_id} was revoked")
    now = timezone.now()
    if key.expires_at <= now:
        raise KeyRefused(f"API key crk_{key.key_id} expired at {key.expires_at:%Y-%m-%d %H:%M} UTC")
    if not key.user.is_active:
        raise KeyRefused(f"the owner of API key crk_{key.key_id} is inactive")
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_EVERY:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return _scoped(key.user, key)


def _bearer(header: str) -> str | None:
    scheme, _, token = (header or "").partition(" ")
    return token if scheme.lower() == "bearer" else None


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """DRF: ``Authorization: Bearer crk_...``. A bad key answers 401 with a ``WWW-Authenticate``
    challenge; a ``read`` key's write answers 403. First of the project's classes, so its
    challenge is the one DRF sends with every 401."""

    def authenticate(self, request):
        token = _bearer(request.META.get("HTTP_AUTHORIZATION", ""))
        if token is None:
            return None
        try:
            user = api_key_user(token)
        except KeyRefused as exc:
            log.warning("API key refused from %s: %s", request.META.get("REMOTE_ADDR"), exc)
            raise exceptions.AuthenticationFailed(str(exc)) from None
        if user.api_key.scope == ApiKey.READ and request.method not in SAFE_METHODS:
            raise exceptions.PermissionDenied(
                f"API key crk_{user.api_key.key_id} has scope 'read': it may not {request.method}; "
                "make a key with a role's scope at /account/api-keys/"
            )
        return user, user.api_key

    def authenticate_header(self, request) -> str:
        if request.META.get("HTTP_AUTHORIZATION", "").lower().startswith("basic "):
            return 'Basic realm="crucible"'
        return CHALLENGE


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """The OpenAPI schema's security scheme of :class:`ApiKeyAuthentication`."""

    target_class = "console.apikeys.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "a personal API key (crk_...), made at /account/api-keys/",
        }


class BasicAuthentication(authentication.BasicAuthentication):
    """DRF's HTTP Basic, handing Django's ``authenticate`` the request django-axes counts
    failures on (DRF's own wrapper would keep axes' lockout mark from its middleware)."""

    def authenticate_credentials(self, userid, password, request=None):
        return super().authenticate_credentials(
            userid, password, getattr(request, "_request", request)
        )


class WebsocketApiKeyMiddleware:
    """Channels: a websocket opened with ``Authorization: Bearer crk_...`` reads as the key's
    owner (websockets only read); a bad key reads as anonymous. Without the header the session's
    user (``AuthMiddlewareStack``, outside this one) stays."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers") or [])
        token = _bearer(headers.get(b"authorization", b"").decode("latin-1"))
        if token is not None:
            scope = {**scope, "user": await database_sync_to_async(self._user)(token)}
        return await self.inner(scope, receive, send)

    @staticmethod
    def _user(token: str):
        try:
            return api_key_user(token)
        except KeyRefused as exc:
            log.warning("API key refused on a websocket: %s", exc)
            return AnonymousUser()


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' answer to a locked-out sign-in: 429 with ``Retry-After``; JSON ``{"field":
    null, "error": ...}`` for the API, a short page for the login form."""
    from django.conf import settings  # noqa: PLC0415 (read per call: tests change it)

    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    message = (
        f"too many failed sign-ins for this account from this address: try again in "
        f"{seconds // 60} minutes, or ask an admin to unlock it (manage.py axes_reset_username)"
    )
    if request.path.startswith("/api/"):
        response = JsonResponse({"field": None, "error": message}, status=429)
    else:
        response = HttpResponse(
            f"<!doctype html><title>Sign-in locked</title><p id='locked'>{message}</p>"
            "<p><a href='/accounts/login/'>back to the sign-in page</a></p>",
            status=429,
        )
    response["Retry-After"] = str(seconds)
    return response
