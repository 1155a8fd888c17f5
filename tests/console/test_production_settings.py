"""The production profile: secrets from the environment or mounted files, HTTPS security that
`manage.py check --deploy` accepts, a refusal without a secret key, and the Redis cache.

Settings are read once per process, so each profile is loaded in a fresh Python process.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from core.env import env_secret

ROOT = Path(__file__).resolve().parents[2]
KEY = secrets.token_urlsafe(50)
# Every variable the settings read secrets or the profile from; each test sets what it needs.
OWN = (
    "CRUCIBLE_PRODUCTION",
    "CRUCIBLE_SECRET_KEY",
    "CRUCIBLE_SECRET_KEY_FILE",
    "DATABASE_URL_FILE",
    "REDIS_URL_FILE",
    "CRUCIBLE_ALLOWED_HOSTS",
    "CRUCIBLE_CSRF_TRUSTED_ORIGINS",
    "CRUCIBLE_SSL_REDIRECT",
    "CRUCIBLE_DEBUG",
)


def clean_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """This environment without the profile's variables, on a fresh var dir, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in OWN}
    return {**env, "CRUCIBLE_VAR_DIR": str(var_dir), **extra}


def production_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """A production profile behind https://crucible.example.org, with ``extra`` overriding it."""
    return clean_env(
        var_dir,
        **{
            "CRUCIBLE_PRODUCTION": "true",
            "CRUCIBLE_SECRET_KEY": KEY,
            "CRUCIBLE_ALLOWED_HOSTS": "crucible.example.org",
            "CRUCIBLE_CSRF_TRUSTED_ORIGINS": "https://crucible.example.org",
            **extra,
        },
    )


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings_of(env: dict[str, str], *names: str) -> dict:
    """The named settings (dotted paths into dicts allowed) as a fresh process loads them."""
    script = (
        "import json, django; django.setup(); from django.conf import settings\n"
        "def get(path):\n"
        "    head, *rest = path.split('.')\n"
        "    value = getattr(settings, head, None)\n"
        "    for key in rest:\n"
        "        value = value[key]\n"
        "    return value\n"
        f"print(json.dumps({{n: get(n) for n in {list(names)!r}}}, default=str))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --- manage.py check --deploy -----------------------------------------------------------------


def test_check_deploy_is_clean_in_production(tmp_path):
    proc = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues (0 silenced)." in proc.stdout
    assert "WARNING" not in proc.stderr and "security." not in proc.stdout + proc.stderr


def test_check_deploy_of_the_embedded_default_names_what_production_would_fix(tmp_path):
    """The same check on the laptop profile is not clean: the production switch is what fixes it."""
    proc = manage(clean_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert proc.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in proc.stderr


@pytest.mark.parametrize(
    "env, names",
    [
        ({"CRUCIBLE_SECRET_KEY": ""}, ["CRUCIBLE_SECRET_KEY", "CRUCIBLE_SECRET_KEY_FILE"]),
        (
            {"CRUCIBLE_SECRET_KEY": "", "CRUCIBLE_SECRET_KEY_FILE": "/no/such/secret"},
            ["CRUCIBLE_SECRET_KEY_FILE", "/no/such/secret"],
        ),
        ({"REDIS_URL_FILE": "/no/such/redis-url"}, ["REDIS_URL_FILE", "/no/such/redis-url"]),
        (
            {"CRUCIBLE_CSRF_TRUSTED_ORIGINS": "crucible.example.org"},
            ["CRUCIBLE_CSRF_TRUSTED_ORIGINS", "https://crucible.example.org"],
        ),
    ],
    ids=["no-secret-key", "missing-key-file", "missing-redis-url-file", "origin-without-scheme"],
)
def test_production_refuses_to_start_and_names_the_variable(tmp_path, env, names):
    full = production_env(tmp_path, **env)
    if "REDIS_URL_FILE" in env:
        full.pop("REDIS_URL", None)  # the two are exclusive; that refusal is tested below
    proc = manage(full, "check", "--deploy")
    assert proc.returncode != 0
    assert proc.stderr.startswith("configuration error: ")
    assert all(name in proc.stderr for name in names), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "secret_key").exists(), (
        "production must never fall back to a generated key"
    )


# --- secrets from files -------------------------------------------------------------------------


def test_secrets_and_urls_are_read_from_mounted_files(tmp_path):
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    (secret_dir / "key").write_text(
        KEY + "\n"
    )  # as `echo KEY > file` or a Kubernetes Secret leaves it
    (secret_dir / "database-url").write_text(f"sqlite:///{tmp_path / 'from-file.sqlite3'}\n")
    (secret_dir / "redis-url").write_text("redis://127.0.0.1:6399/7\n")
    env = production_env(
        tmp_path / "var",
        CRUCIBLE_SECRET_KEY="",
        CRUCIBLE_SECRET_KEY_FILE=str(secret_dir / "key"),
        DATABASE_URL_FILE=str(secret_dir / "database-url"),
        REDIS_URL_FILE=str(secret_dir / "redis-url"),
    )
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    got = settings_of(
        env,
        "SECRET_KEY",
        "DATABASES.default.NAME",
        "REDIS_URL",
        "CACHES.default.LOCATION",
        "CELERY_BROKER_URL",
        "EMBEDDED_REDIS",
    )
    assert got == {
        "SECRET_KEY": KEY,
        "DATABASES.default.NAME": str(tmp_path / "from-file.sqlite3"),
        "REDIS_URL": "redis://127.0.0.1:6399/7",
        "CACHES.default.LOCATION": "redis://127.0.0.1:6399/7",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6399/7",
        "EMBEDDED_REDIS": False,
    }


def test_env_secret_reads_the_variable_or_its_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CRUCIBLE_TEST_SECRET", raising=False)
    monkeypatch.delenv("CRUCIBLE_TEST_SECRET_FILE", raising=False)
    assert env_secret("CRUCIBLE_TEST_SECRET", "fallback") == "fallback"

    monkeypatch.setenv("CRUCIBLE_TEST_SECRET", "from-env")
    assert env_secret("CRUCIBLE_TEST_SECRET") == "from-env"

    secret = tmp_path / "secret"
    secret.write_text("  from-file\n")
    monkeypatch.setenv("CRUCIBLE_TEST_SECRET_FILE", str(secret))
    with pytest.raises(
        ImproperlyConfigured,
        match="both CRUCIBLE_TEST_SECRET and CRUCIBLE_TEST_SECRET_FILE are set",
    ):
        env_secret("CRUCIBLE_TEST_SECRET")

    monkeypatch.delenv("CRUCIBLE_TEST_SECRET")
    assert env_secret("CRUCIBLE_TEST_SECRET") == "from-file"

    secret.write_text("\n")
    with pytest.raises(
        ImproperlyConfigured, match=f"CRUCIBLE_TEST_SECRET_FILE='{secret}' is empty"
    ):
        env_secret("CRUCIBLE_TEST_SECRET")

    secret.unlink()
    with pytest.raises(
        ImproperlyConfigured, match=f"CRUCIBLE_TEST_SECRET_FILE='{secret}' cannot be read"
    ):
        env_secret("CRUCIBLE_TEST_SECRET", "fallback")

    secret.write_bytes(b"\xff\xfe")
    with pytest.raises(ImproperlyConfigured, match="CRUCIBLE_TEST_SECRET_FILE"):
        env_secret("CRUCIBLE_TEST_SECRET")


# --- the two profiles' security settings ------------------------------------------------------

SECURITY = [
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "X_FRAME_OPTIONS",
    "CSRF_TRUSTED_ORIGINS",
]


def test_embedded_default_keeps_http_and_a_generated_key(tmp_path):
    env = clean_env(tmp_path)
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    first = settings_of(
        env, "SECRET_KEY", "DATABASES.default.ENGINE", "CACHES.default.LOCATION", *SECURITY
    )
    assert first.pop("SECRET_KEY") == (tmp_path / "secret_key").read_text().strip()
    assert oct((tmp_path / "secret_key").stat().st_mode & 0o777) == "0o600"
    assert first == {
        "DATABASES.default.ENGINE": "django.db.backends.sqlite3",
        "CACHES.default.LOCATION": f"unix://{tmp_path.resolve() / 'redis.sock'}?db=0",
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": None,
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "X_FRAME_OPTIONS": "DENY",
        "CSRF_TRUSTED_ORIGINS": [],
    }
    # the key is generated once per var dir and kept
    assert (
        settings_of(env, "SECRET_KEY")["SECRET_KEY"]
        == (tmp_path / "secret_key").read_text().strip()
    )


def test_production_turns_on_https_security_and_trusts_the_ingress_when_told(tmp_path):
    got = settings_of(
        production_env(
            tmp_path,
            CRUCIBLE_TRUST_X_FORWARDED_PROTO="true",
            CRUCIBLE_HSTS_PRELOAD="false",
            CRUCIBLE_SSL_REDIRECT="off",
        ),
        *SECURITY,
    )
    assert got == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "X_FRAME_OPTIONS": "DENY",
        "CSRF_TRUSTED_ORIGINS": ["https://crucible.example.org"],
    }


@pytest.mark.django_db  # /healthz checks the database
def test_https_redirect_spares_health_probes_and_honours_the_proxy_header(settings):
    """The production redirect as SecurityMiddleware applies it (settings as production sets
    them)."""
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client()
    plain = client.get("/tasks/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/tasks/"
    probe = client.get("/healthz")
    assert probe.status_code == 200 and probe.json()["ok"] is True
    behind_ingress = client.get("/healthz", headers={"x-forwarded-proto": "https"})
    assert behind_ingress["Strict-Transport-Security"] == "max-age=31536000"
    assert behind_ingress["X-Content-Type-Options"] == "nosniff"
    assert "Strict-Transport-Security" not in probe  # HSTS only over HTTPS


# --- the cache ---------------------------------------------------------------------------------


@pytest.mark.postgresql  # the production profile's Redis, not a database fixture
def test_the_cache_is_the_configured_redis_and_round_trips(settings):
    """Django's RedisCache on REDIS_URL: the embedded Redis's ``unix://`` socket URL, or the real
    one."""
    assert settings.CACHES["default"]["LOCATION"] == settings.REDIS_URL
    if settings.EMBEDDED_REDIS:
        assert settings.REDIS_URL.startswith("unix://")
    value = {"run": 7, "reward": [0.25, 1.0], "note": "ünïcode"}
    key = f"production-settings-{secrets.token_hex(4)}"
    cache.set(key, value, timeout=60)
    try:
        assert cache.get(key) == value
        raw = redis.Redis.from_url(settings.REDIS_URL)
        stored = cache.make_key(key)
        assert stored.startswith(f"{settings.CACHES['default']['KEY_PREFIX']}:")
        assert raw.exists(stored) and 0 < raw.ttl(stored) <= 60
        counter = f"{key}-n"
        assert cache.add(counter, 1) and not cache.add(counter, 5)  # add: only when absent
        assert cache.incr(counter) == 2 and cache.get(counter) == 2
    finally:
        cache.delete_many([key, f"{key}-n"])
    assert cache.get(key) is None


# --- who may read by default ------------------------------------------------------------------


def _public(env: dict[str, str]) -> bool:
    env = {k: v for k, v in env.items() if k != "CRUCIBLE_CONSOLE_PUBLIC"}
    return settings_of(env, "CRUCIBLE_CONSOLE_PUBLIC")["CRUCIBLE_CONSOLE_PUBLIC"]


def test_production_is_private_unless_opened_on_purpose(tmp_path):
    assert _public(production_env(tmp_path)) is False
    assert _public(clean_env(tmp_path)) is True  # the laptop console stays open
    opened = production_env(tmp_path)
    assert settings_of(
        {**opened, "CRUCIBLE_CONSOLE_PUBLIC": "true"}, "CRUCIBLE_CONSOLE_PUBLIC"
    ) == {"CRUCIBLE_CONSOLE_PUBLIC": True}
