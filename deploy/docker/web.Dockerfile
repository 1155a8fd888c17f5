# syntax=docker/dockerfile:1
# The console: Django + Channels under daphne (ASGI), static files served by WhiteNoise.
#
#   docker build -f deploy/docker/web.Dockerfile -t REGISTRY/crucible-web:TAG .
#
# Build context: the repository root (web.Dockerfile.dockerignore beside this file keeps it small).
# Build args: PYTHON_IMAGE, NODE_IMAGE (pin them by digest in a release), TORCH_INDEX_URL
# (the CPU wheels of torch: the console never runs a model, and they are a tenth of the CUDA build).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

# --- the console's JavaScript, bundled with plotly.js from npm (frontend/build.mjs) ---------------
FROM ${NODE_IMAGE} AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json frontend/.npmrc ./
RUN npm ci --no-audit --no-fund
COPY frontend/build.mjs ./
COPY frontend/console ./console
RUN npm run build

# --- the pinned Python dependencies in a virtualenv --------------------------------------------
FROM ${PYTHON_IMAGE} AS python-deps
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt /tmp/requirements.txt
# torch==2.13.0 in requirements.txt is satisfied by 2.13.0+cpu from the extra index.
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --extra-index-url "${TORCH_INDEX_URL}" -r /tmp/requirements.txt

# --- the image ----------------------------------------------------------------------------------
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
COPY frontend ./frontend
COPY --from=frontend /src/frontend/dist ./frontend/dist
# Bytecode now (the root filesystem is read-only at run time), and the static files collected
# for WhiteNoise; the key below exists for this one command and is not in the image.
RUN python -m compileall -q /app \
 && CRUCIBLE_SECRET_KEY=collectstatic-only CRUCIBLE_VAR_DIR=/tmp/build-var python manage.py collectstatic --noinput --verbosity 0 \
 && rm -rf /tmp/build-var
USER 10001:10001
EXPOSE 8000
# Kubernetes probes GET /healthz; no HEALTHCHECK here (Kubernetes ignores it).
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
