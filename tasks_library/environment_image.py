"""An environment version as a container image: the build context ``environment_image`` writes.

The image is the Python sandbox image (``deploy/docker/sandbox-python.Dockerfile``) plus the
environment built into its store by the same code that builds it here (``manage.py
build_environment --spec environment.json``), so its layers get the same build hashes; the
packages are installed from the lock of the local build (every package, its exact version and
its file's sha256: ``--no-deps --require-hashes``), so a later build gets the same files
though the index has moved on. The builder stage runs as root; an environment with a Debian
root builds it with mmdebstrap in a user namespace, which BuildKit allows a ``RUN
--security=insecure`` step (``docker buildx build --allow security.insecure``; no Docker daemon
runs where Crucible's tests run, so this step is written, not built, there); the final
stage copies the store read-only and runs as the sandbox user (10001). Its pods consume the
environment's own queue (``<runtime>@<key>``, ``CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT``): the
Deployment written beside it selects this image for this environment.

Files written: ``Dockerfile``, ``environment.json``, ``sandbox-deployment.json`` (a Deployment,
JSON being YAML, for ``kubectl apply -f``), ``README.txt`` (the commands).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from core.errors import InputError
from sandboxes.environments.build import queue_runtime
from sandboxes.environments.store import manifest_digest
from tasks_library.environments import environment_build, environment_spec
from tasks_library.models import EnvironmentVersion
from tasks_library.services import environment_name_problem

UID = 10001  # the sandbox image's user (deploy/docker/sandbox-python.Dockerfile)
STORE_IN_IMAGE = "/opt/crucible/environments"
DEFAULT_BASE = "crucible/sandbox-python:python3.11"
REDIS_URL_FILE = "/run/secrets/crucible/REDIS_URL"  # the sandbox pools' own Redis user
IMAGE_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$")


def image_files(environment: EnvironmentVersion, *, base_image: str, image: str) -> dict[str, str]:
    """The build context's files (name -> text) of ``environment``, built here first (its lock
    and build keys come from that build).

    Raises:
        EnvironmentUnavailable: it cannot be built here (the image would not be the same).
    """
    if not IMAGE_REFERENCE.match(base_image):
        raise InputError(
            f"base image {base_image!r} is not an image reference (REGISTRY/NAME:TAG or "
            "NAME@sha256:DIGEST)",
            field="base_image",
        )
    tag = base_image.rsplit("/", 1)[-1]
    if "@sha256:" not in base_image and (":" not in tag or tag.endswith(":latest")):
        raise InputError(
            f"base image {base_image!r} is not pinned: give a tag other than latest, or a digest "
            "(NAME@sha256:...)",
            field="base_image",
        )
    built = environment_build(environment=environment)
    spec = environment_spec(environment)
    packages_lock = [
        {k: p[k] for k in ("name", "version", "sha256")}
        for p in environment.resolved_packages
        if p.get("layer") == "packages" and spec.family == "python"
    ]
    layers = built.request_field()
    queue = f"{queue_runtime(spec.runtime, spec.family)}@{built.key[:16]}"
    description = {
        "name": environment.name,
        "content_hash": environment.content_hash,
        "runtime": spec.runtime,
        "packages": spec.packages,
        "debian_packages": list(spec.debian_packages),
        "source_builds": spec.source_builds,
        "lock": packages_lock,
        "key": built.key,
        "root": layers["root"],
        "packages_hash": layers["packages"],
        "queue": queue,
        # The manifest (every file's sha256) of the packages built here: the image's build
        # refuses to finish with other bytes.
        "packages_manifest_sha256": manifest_digest(built.packages) if built.packages else None,
    }
    return {
        "Dockerfile": dockerfile(environment, description, base_image=base_image),
        "environment.json": json.dumps(description, indent=1, sort_keys=True) + "\n",
        "sandbox-deployment.json": json.dumps(
            deployment(environment, description, image=image), indent=1
        )
        + "\n",
        "README.txt": (
            f"Environment {quoted(environment)} ({spec.runtime}; {len(spec.packages)} pinned "
            "packages)\n"
            f"  docker build --build-arg SANDBOX_IMAGE=REGISTRY/crucible-sandbox-python:TAG "
            f"-t {image} .\n"
            f"  kubectl -n crucible apply -f sandbox-deployment.json\n"
            "The trainer and validation must run with CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT=true "
            f"so that this environment's executions go to {queue}.\n"
        ),
    }


def quoted(value: str) -> str:
    """``value`` as a Dockerfile string: JSON's double-quoted form (ASCII, every quote,
    backslash and control character escaped), so nothing it holds starts a new instruction."""
    return json.dumps(str(value))


def dockerfile(environment: EnvironmentVersion, description: dict, *, base_image: str) -> str:
    """The Dockerfile (see the module). What it embeds of the environment (its name, runtime,
    key, queue, base image) is quoted (:func:`quoted`), never spliced in raw."""
    needs_root_fs = bool(description["root"])
    lines = [
        "# syntax=docker/dockerfile:1",
        f"# Environment {quoted(environment)}: {quoted(description['runtime'])}, "
        f"{len(description['packages'])} pinned packages, build key {description['key']}.",
        "# Written by `manage.py environment_image`; the build context is this directory.",
        f"ARG SANDBOX_IMAGE={base_image}",  # an image reference (checked by image_files)
        "",
        "FROM ${SANDBOX_IMAGE} AS build",
        "USER root",
    ]
    if needs_root_fs:
        lines += [
            "RUN apt-get update \\",
            " && apt-get install -y --no-install-recommends mmdebstrap \\",
            " && rm -rf /var/lib/apt/lists/*",
        ]
    lines += [
        "COPY environment.json /tmp/environment.json",
        ("RUN --security=insecure " if needs_root_fs else "RUN ")
        + f"CRUCIBLE_ENVIRONMENT_STORE={STORE_IN_IMAGE} "
        "python manage.py build_environment --spec /tmp/environment.json",
        "",
        "FROM ${SANDBOX_IMAGE}",
        f"COPY --from=build --chown=root:root {STORE_IN_IMAGE} {STORE_IN_IMAGE}",
        f"ENV CRUCIBLE_ENVIRONMENT_STORE={STORE_IN_IMAGE} \\",
        "    CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT=true",
        f"LABEL io.crucible.environment={quoted(environment)} \\",
        f"      io.crucible.environment.key={quoted(description['key'])}",
        f"USER {UID}:{UID}",
        "CMD "
        + json.dumps(
            ["python", "manage.py", "sandbox_worker", "--runtime", description["queue"]]
            + ["--concurrency", "2"]
        ),
        "",
    ]
    return "\n".join(lines)


def deployment(environment: EnvironmentVersion, description: dict, *, image: str) -> dict:
    """A Deployment of this environment's sandbox pool, as locked down as the base pool's
    (deploy/kubernetes/base/sandbox-python.yaml)."""
    name = f"crucible-sandbox-env-{description['key'][:12]}"
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": "sandbox",
        "crucible.io/environment-key": description["key"][:63],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "crucible-sandbox",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "fsGroup": UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "sandbox",
                            "image": image,
                            "command": [
                                "python",
                                "manage.py",
                                "sandbox_worker",
                                "--runtime",
                                description["queue"],
                                "--concurrency",
                                "2",
                            ],
                            "env": [
                                {
                                    "name": "REDIS_URL_FILE",
                                    "value": "/run/secrets/crucible/REDIS_URL",
                                },
                                {"name": "CRUCIBLE_VAR_DIR", "value": "/var/lib/crucible"},
                                {"name": "CRUCIBLE_LOG_FORMAT", "value": "json"},
                            ],
                            "resources": {
                                "requests": {"cpu": "2", "memory": "1Gi"},
                                "limits": {
                                    "cpu": "2",
                                    "memory": "5Gi",
                                    "ephemeral-storage": "1Gi",
                                },
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "privileged": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {
                                    "name": "redis-url",
                                    "mountPath": "/run/secrets/crucible",
                                    "readOnly": True,
                                },
                                {"name": "var", "mountPath": "/var/lib/crucible"},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "redis-url",
                            "secret": {
                                "secretName": "crucible-sandbox-redis",
                                "defaultMode": 0o440,
                                "items": [{"key": "REDIS_URL", "path": "REDIS_URL"}],
                            },
                        },
                        {"name": "var", "emptyDir": {"sizeLimit": "256Mi"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
                    ],
                },
            },
        },
    }


def default_output(environment: EnvironmentVersion, images: Path) -> Path:
    """``images/NAME-HASH12`` (``images/environment-HASH12`` for a name stored before names
    were slugs), checked to lie inside ``images``."""
    name = environment.name if environment_name_problem(environment.name) is None else "environment"
    target = images / f"{name}-{environment.content_hash[:12]}"
    if target.resolve().parent != images.resolve():
        raise InputError(f"environment {environment.pk}: its name makes no directory name")
    return target


def environment_image_write(
    *, environment: EnvironmentVersion, output: Path, base_image: str, image: str
) -> list[Path]:
    """Write the build context of ``environment`` into ``output``; the paths written."""
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in image_files(environment, base_image=base_image, image=image).items():
        (output / name).write_text(text)
        written.append(output / name)
    return written
