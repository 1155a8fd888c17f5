# syntax=docker/dockerfile:1
# The trainer: `python manage.py run_trainer RUN_ID` (under torchrun for several ranks), the
# container of the Job each run's attempt gets from the kubernetes launch backend
# (training/kubernetes.py; the Job's image is the `image` of the trainer spec, see
# deploy/kubernetes/base/trainer-spec.json).
#
#   GPU (default): docker build -f deploy/docker/trainer.Dockerfile -t REGISTRY/crucible-trainer:TAG .
#   CPU only:      docker build -f deploy/docker/trainer.Dockerfile \
#                    --build-arg BASE_IMAGE=debian:bookworm-slim \
#                    --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
#                    -t REGISTRY/crucible-trainer:TAG-cpu .
#
# BASE_IMAGE is any glibc Linux; Python 3.11 comes from uv's standalone builds, not from the
# base, so a CUDA image of any Ubuntu release works. torch==2.13.0 (requirements.txt) from PyPI
# carries its CUDA libraries as wheels (nvidia-*); the CUDA base adds the NVIDIA container
# toolkit's environment (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES) and the CUDA
# compatibility libraries. The node's driver must support the CUDA release of the torch wheel.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu22.04
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${BASE_IMAGE} AS python-deps
ARG PYTHON_VERSION=3.11
# Empty: PyPI (CUDA wheels on Linux). https://download.pytorch.org/whl/cpu: CPU wheels.
ARG TORCH_INDEX_URL=
ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    UV_NO_CACHE=1
COPY --from=uv /uv /usr/local/bin/uv
COPY requirements.txt /tmp/requirements.txt
RUN uv python install "${PYTHON_VERSION}" \
 && uv venv --python "${PYTHON_VERSION}" /opt/venv \
 && if [ -n "${TORCH_INDEX_URL}" ]; then \
      uv pip install --python /opt/venv/bin/python --extra-index-url "${TORCH_INDEX_URL}" \
        --index-strategy unsafe-best-match -r /tmp/requirements.txt; \
    else \
      uv pip install --python /opt/venv/bin/python -r /tmp/requirements.txt; \
    fi

FROM ${BASE_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=console.settings \
    CRUCIBLE_VAR_DIR=/var/lib/crucible \
    HOME=/var/lib/crucible \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN groupadd --system --gid 10001 crucible \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/crucible --shell /usr/sbin/nologin crucible \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/crucible
COPY --from=python-deps /opt/python /opt/python
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
# The backend gives the command (python manage.py run_trainer RUN_ID); this default says how.
CMD ["python", "manage.py", "run_trainer", "--help"]
