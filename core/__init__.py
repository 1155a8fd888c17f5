"""The project core: what every Crucible process needs, importing no Crucible app.

Environment helpers (:mod:`.env`), log context (:mod:`.logcontext`), metrics (:mod:`.metrics`),
event publishing to the console's channel groups (:mod:`.events`), text made storable
(:mod:`.dbtext`), typed input errors (:mod:`.errors`), the console's roles and rules
(:mod:`.permissions`) and how views enforce them (:mod:`.access`), Celery queue names and routes
(:mod:`.queues`), the front-end build (:mod:`.frontend`) and housekeeping (:mod:`.maintenance`).
The sandbox worker, the trainer and the Celery workers import from here, never from the
console's pages. The core imports no app at all: the service launcher, which starts Celery and
sandbox workers, is ``console.management.stack``. ``lint-imports`` (contracts in
``pyproject.toml``) keeps it so.
"""
