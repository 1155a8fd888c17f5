# syntax=docker/dockerfile:1
# A pool member of the Python sandbox: `manage.py sandbox_worker --runtime python`, consuming
# the Redis list crucible:sandbox:python:pending. It needs Redis and nothing else (no database,
# no Kubernetes API), so the image holds Django and the sandbox code but none of the training
# stack (sandbox-requirements-exclude.txt).
#
#   docker build -f deploy/docker/sandbox-python.Dockerfile -t REGISTRY/crucible-sandbox-python:TAG .
#
# Executions run in the zygote's namespaces with this image's /usr, /bin, /lib* and /etc as
# their read-only root: the Python they run is the image's /usr/local/bin/python3.11, with
# the standard library only (python -I -S), as on a developer's machine.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

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
CMD ["python", "manage.py", "sandbox_worker", "--runtime", "python", "--concurrency", "2"]
