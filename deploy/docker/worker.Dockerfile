# syntax=docker/dockerfile:1
# A Celery worker (one Deployment per queue: control, validation, celery) and Celery beat.
#
#   docker build -f deploy/docker/worker.Dockerfile -t REGISTRY/crucible-worker:TAG .
#
# The queue and concurrency come from the command line (the Kubernetes manifests set them):
#   celery -A console worker -Q control --concurrency 2
#   celery -A console beat --schedule /var/lib/crucible/celerybeat-schedule
# Build args: PYTHON_IMAGE (pin it by digest in a release), TORCH_INDEX_URL (CPU wheels: on
# Kubernetes the trainer runs in its own Job, never inside a worker).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS python-deps
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --extra-index-url "${TORCH_INDEX_URL}" -r /tmp/requirements.txt

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=console.settings \
    CRUCIBLE_VAR_DIR=/var/lib/crucible \
    HOME=/var/lib/crucible
RUN groupadd --system --gid 10001 crucible \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/crucible --shell /usr/sbin/nologin crucible \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/crucible
COPY --from=python-deps /opt/venv /opt/venv
WORKDIR /app
COPY manage.py ./
COPY core ./core
COPY console ./console
COPY tasks_library ./tasks_library
COPY sandboxes ./sandboxes
COPY training ./training
# The console's sources too (no build): the settings list them as static directories, and a
# missing one is a warning on every command.
COPY frontend ./frontend
RUN python -m compileall -q /app
USER 10001:10001
CMD ["celery", "-A", "console", "worker", "-Q", "control", "--concurrency", "2", "--loglevel", "INFO"]
