"""The console's own records: personal API keys (:mod:`console.apikeys` creates, checks and
revokes them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiKey(models.Model):
    """A personal API key: a bearer token for the REST API (and the websockets, for reading) that
    acts for ``user`` within ``scope``, until ``expires_at`` or until revoked.

    Only a SHA-256 digest of the key is stored; the key itself is shown once, when it is made.
    ``key_id`` (12 hex characters, also the key's visible prefix) finds the row.
    """

    READ = "read"
    SCOPES = [
        (READ, "read only"),
        ("curators", "read, and what curators write"),
        ("operators", "read, and what operators write"),
        ("reviewers", "read, and what reviewers write"),
    ]

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100, help_text="what the key is for, e.g. 'nightly eval'")
    key_id = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64, help_text="SHA-256 of the whole key, hex")
    scope = models.CharField(max_length=20, choices=SCOPES)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (crk_{self.key_id}..., {self.scope}, {self.user})"

    @property
    def status(self) -> str:
        """``active``, ``expired`` or ``revoked``."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "active"
