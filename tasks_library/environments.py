"""Building environment versions: their layers into the store, the outcome onto the row.

:func:`environment_build` is what validation, the build job and ``build_environment`` call: it
checks the version's runtime and pins, builds (or finds) its layers in the content-addressed
store (``sandboxes.environments``), and records on the :class:`EnvironmentVersion` what was
installed, sizes, build seconds and log, or the failure with its reason. A failed build
publishes nothing; the task versions that need it are left unvalidated (see
``validation/pipeline.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import transaction

from core.errors import InputError
from core.events import broadcast_event, environment_group
from sandboxes.environments.build import (
    Materialised,
    environment_queue,
    materialise,
    queue_runtime,
)
from sandboxes.environments.spec import EnvironmentSpec, EnvironmentSpecError, parse
from sandboxes.environments.store import EnvironmentBuildError
from tasks_library.models import EnvironmentVersion, TaskVersion
from tasks_library.services import (
    environment_get_or_create,
    environment_name_problem,
    task_version_edit,
)


class EnvironmentUnavailable(InputError):
    """An environment version that cannot be built as written (or whose build failed).

    Attributes:
        kind: the build error's kind (``missing_package``, ``unpinned``, ``conflict``,
            ``out_of_disk``, ``timeout``, ``runtime_unavailable``...).
        package: the requirement at fault, when one is.
    """

    def __init__(self, message: str, *, field: str, kind: str, package: str = "") -> None:
        super().__init__(message, field=field)
        self.kind, self.package = kind, package


def environment_spec(environment: EnvironmentVersion) -> EnvironmentSpec:
    """The checked spec of ``environment``.

    Raises:
        EnvironmentUnavailable: an unknown runtime or an unpinned package (field ``runtime``
            or ``packages``), the message naming the environment.
    """
    try:
        return parse(
            environment.runtime,
            list(environment.packages),
            source_builds=environment.source_builds,
            debian_packages=list(environment.debian_packages or []),
        )
    except EnvironmentSpecError as exc:
        raise EnvironmentUnavailable(
            f"environment {environment}: {exc}",
            field=exc.field,
            kind="unpinned" if exc.field == "packages" else "runtime_unavailable",
            package=exc.package,
        ) from None


def environment_build(
    *, environment: EnvironmentVersion, progress: Callable[[str], None] | None = None
) -> Materialised:
    """Build ``environment``'s layers (a cache hit when built already) and record the outcome.

    Returns:
        the built layers (``request_field()`` goes into sandbox requests).

    Raises:
        EnvironmentUnavailable: the spec is refused or the build failed; the row records
            ``build_status="failed"`` with the message and the log.
    """
    EnvironmentVersion.objects.filter(pk=environment.pk).update(build_status="building")
    environment_build_publish(environment.pk)
    try:
        spec = environment_spec(environment)
        built = materialise(spec, progress=progress)
    except EnvironmentUnavailable as exc:
        _record_failure(environment, str(exc), "")
        raise
    except EnvironmentSpecError as exc:  # the runtime cannot be provided here
        message = f"environment {environment}: {exc}"
        _record_failure(environment, message, "")
        raise EnvironmentUnavailable(
            message, field=exc.field, kind="runtime_unavailable", package=exc.package
        ) from None
    except EnvironmentBuildError as exc:
        message = f"environment {environment}: {exc}"
        _record_failure(environment, message, exc.log)
        raise EnvironmentUnavailable(
            message, field="packages", kind=exc.kind, package=exc.package
        ) from None
    layers = [(name, b) for name, b in (("root", built.root), ("packages", built.packages)) if b]
    fields = {
        "build_status": EnvironmentVersion.BUILD_BUILT,
        "build_key": built.key,
        "build_error": "",
        "build_log": "\n".join(f"== {name} ==\n{b.record.get('log', '')}" for name, b in layers),
        "resolved_packages": [
            dict(entry, layer=name) for name, b in layers for entry in b.record.get("resolved", [])
        ],
        "size_bytes": sum(int(b.record.get("size_bytes", 0)) for _n, b in layers),
        # the layers' own build: a cache hit keeps the seconds and time of the build that ran
        "build_seconds": round(sum(float(b.record.get("seconds", 0)) for _n, b in layers), 3),
        "built_at": _built_at(environment, [b for _n, b in layers]),
    }
    EnvironmentVersion.objects.filter(pk=environment.pk).update(**fields)
    for name, value in fields.items():
        setattr(environment, name, value)
    environment_build_publish(environment.pk)
    return built


def _built_at(environment: EnvironmentVersion, layers: list) -> datetime:
    """When ``environment``'s layers were built: the newest layer's publication (a cache hit's
    check is not a build); without layers (the host's runtime alone) when it was first found
    usable."""
    if layers:
        return datetime.fromtimestamp(max(b.published_at for b in layers), UTC)
    return environment.built_at or datetime.now(UTC)


def _record_failure(environment: EnvironmentVersion, message: str, log: str) -> None:
    fields = {
        "build_status": EnvironmentVersion.BUILD_FAILED,
        "build_error": message,
        "build_log": log,
    }
    EnvironmentVersion.objects.filter(pk=environment.pk).update(**fields)
    for name, value in fields.items():
        setattr(environment, name, value)
    environment_build_publish(environment.pk)


def environment_build_event(environment: EnvironmentVersion) -> dict:
    """The wire form of an environment version's build, as its page draws it: ``{"kind":
    "build", "id", "build_status", "build_status_display", "build_key", "build_error",
    "build_log", "size_bytes", "build_seconds", "built_at" (ISO 8601 or None)}``."""
    return {
        "kind": "build",
        "id": environment.pk,
        "build_status": environment.build_status,
        "build_status_display": environment.get_build_status_display(),
        "build_key": environment.build_key,
        "build_error": environment.build_error,
        "build_log": environment.build_log,
        "size_bytes": environment.size_bytes,
        "build_seconds": environment.build_seconds,
        "built_at": environment.built_at.isoformat() if environment.built_at else None,
    }


def environment_build_publish(environment_id: int) -> None:
    """Tell the watchers of an environment version's page its build as persisted now (every
    change is written first: a page that connects later reads the same from the row)."""
    environment = EnvironmentVersion.objects.filter(pk=environment_id).first()
    if environment is not None:
        broadcast_event(environment_group(environment_id), environment_build_event(environment))


_requests: dict[str, dict] = {}


def environment_request(environment: EnvironmentVersion) -> dict:
    """The ``environment`` field of sandbox requests for task versions of ``environment``
    (``Materialised.request_field()``), built on first use in this process.

    Raises:
        EnvironmentUnavailable: it cannot be built (see :func:`environment_build`).
    """
    found = _requests.get(environment.content_hash)
    if found is None:
        found = _requests[environment.content_hash] = environment_build(
            environment=environment
        ).request_field()
    return found


def environment_get(reference: str) -> EnvironmentVersion:
    """An environment version by id (``17``), content-hash prefix (6+ hex digits) or name (its
    newest version).

    Raises:
        InputError: none matches, or a hash prefix matches several (field ``environment``).
    """
    reference = (reference or "").strip()
    if reference.isdigit():
        found = EnvironmentVersion.objects.filter(pk=int(reference)).first()
        if found:
            return found
    if len(reference) >= 6 and all(c in "0123456789abcdef" for c in reference):
        matches = list(EnvironmentVersion.objects.filter(content_hash__startswith=reference)[:2])
        if len(matches) > 1:
            raise InputError(
                f"environment {reference!r}: several versions start with that hash; give more "
                "digits",
                field="environment",
            )
        if matches:
            return matches[0]
    found = EnvironmentVersion.objects.filter(name=reference).order_by("-created_at", "-pk").first()
    if found is None:
        known = sorted(set(EnvironmentVersion.objects.values_list("name", flat=True)))
        raise InputError(
            f"no environment {reference!r}; give an id, a content-hash prefix or a name "
            f"(known names: {', '.join(known) or 'none'})",
            field="environment",
        )
    return found


def store_keys_in_use() -> set[str]:
    """The store hashes (roots and packages) of every environment version a task version uses,
    and the roots of the runtimes this machine's workers serve."""
    keys = {spec_root for spec_root in _runtime_roots()}
    used = EnvironmentVersion.objects.filter(taskversion__isnull=False).distinct()
    for environment in used:
        try:
            spec = environment_spec(environment)
        except EnvironmentUnavailable:
            continue
        keys.update(k for k in (spec.root_hash(), spec.packages_hash()) if k)
    return keys


def _runtime_roots() -> list[str]:
    from sandboxes.environments.debian import ROOTS  # noqa: PLC0415 (only for the collector)

    return [h for h in (parse(runtime, []).root_hash() for runtime in ROOTS) if h]


def environment_queue_of(environment: EnvironmentVersion, family: str) -> str:
    """The sandbox queue that grades task versions of ``environment`` (without building it)."""
    try:
        spec = environment_spec(environment)
    except EnvironmentUnavailable:
        return queue_runtime(environment.runtime, family)
    packages = spec.packages_hash()
    return environment_queue(
        environment.runtime, family, packages or "", has_layers=packages is not None
    )


def environment_create(
    *,
    name: str,
    runtime: str,
    packages: list[str],
    image: str = "",
    source_builds: bool = False,
    debian_packages: list[str] | None = None,
    author: str = "",
    change_note: str = "",
    parent: EnvironmentVersion | None = None,
) -> EnvironmentVersion:
    """A new environment version (or the existing one with exactly this content); with
    ``parent``, a new version of that environment (its edit). ``source_builds``: packages
    without a wheel are built from their sdists in a build sandbox (else refused).
    ``debian_packages``: Debian packages installed into a python3.13 environment's root.

    Raises:
        InputError: an empty name, an unknown runtime, an unpinned or repeated package (field
            ``name``, ``runtime`` or ``packages``, naming the package), an edit without a change
            note or without a change.
    """
    name = (name or "").strip()
    if not name:
        raise InputError("name: give the environment a name (at most 100 characters)", field="name")
    problem = environment_name_problem(name)
    if problem:
        raise InputError(f"name: {problem}", field="name")
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise InputError("packages: a list of pinned requirements, one a line", field="packages")
    packages = [p.strip() for p in packages if p.strip()]
    try:
        spec = parse(
            runtime, packages, source_builds=source_builds, debian_packages=debian_packages or []
        )
    except EnvironmentSpecError as exc:
        raise InputError(f"{exc.field}: {exc}", field=exc.field) from None
    if len(image or "") > 300:
        raise InputError("image: at most 300 characters", field="image")
    content = {"name": name, "runtime": runtime, "packages": packages, "image": image or ""}
    if source_builds:
        content["source_builds"] = True
    if spec.debian_packages:
        content["debian_packages"] = list(spec.debian_packages)
    if parent is not None:
        if not change_note.strip():
            raise InputError("change_note: say what changed and why", field="change_note")
        if parent.content() == content:
            raise InputError("nothing changed: edit the runtime, packages or image", field=None)
    return environment_get_or_create(
        content=content, author=author, change_note=change_note, parent=parent
    )


@transaction.atomic
def environment_move(
    *, old: EnvironmentVersion, new: EnvironmentVersion, author: str, change_note: str
) -> list:
    """Give every task whose newest version runs in ``old`` a new version in ``new`` (nothing
    else changes); returns the new task versions, pending validation.

    Raises:
        InputError: no task's newest version uses ``old``, or a harness cannot run in ``new``'s
            runtime (from the edit).
    """
    newest = {}
    candidates = TaskVersion.objects.select_related("task", "test_suite", "environment")
    for version in candidates.filter(task__versions__environment=old).order_by(
        "task_id", "-number"
    ):
        newest.setdefault(version.task_id, version)
    moving = [v for v in newest.values() if v.environment_id == old.pk]
    if not moving:
        raise InputError(
            f"no task's newest version runs in {old}; nothing to move", field="environment"
        )
    content = new.content()
    return [
        task_version_edit(
            version=version,
            author=author,
            change_note=change_note or f"moved to environment {new}",
            environment=content,
        )
        for version in moving
    ]
