"""Content hashes: the identity of every immutable version."""

from __future__ import annotations

import hashlib
import json


def content_hash(content: dict) -> str:
    """SHA-256 hex digest of ``content`` as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
