# syntax=docker/dockerfile:1
# A pool member of the JavaScript sandbox: `manage.py sandbox_worker --runtime node`, consuming
# the Redis list crucible:sandbox:node:pending. The worker and the grading harness's driver are
# Python; the submissions run under Node.js 20, copied from the official image (same Debian
# release, so its glibc and libstdc++ match).
#
#   docker build -f deploy/docker/sandbox-node.Dockerfile -t REGISTRY/crucible-sandbox-node:TAG .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS node

FROM ${PYTHON_IMAGE} AS python-deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt deploy/docker/sandbox-requirements-exclude.txt deploy/docker/filter_requirements.py /tmp/
RUN python /tmp/filter_requirements.py /tmp/requirements.txt /tmp/sandbox-requirements-exclude.txt > /tmp/sandbox-requirements.txt \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install -r /tmp/sandbox-requirements.txt

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=console.settings \
    CRUCIBLE_VAR_DIR=/var/lib/crucible \
    HOME=/var/lib/crucible
# node alone: the sandbox runs `node` on the harness's files, never npm.
COPY --from=node /usr/local/bin/node /usr/local/bin/node
RUN groupadd --system --gid 10001 crucible \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/crucible --shell /usr/sbin/nologin crucible \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/crucible \
 && node --version
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
CMD ["python", "manage.py", "sandbox_worker", "--runtime", "node", "--concurrency", "2"]
