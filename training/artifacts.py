"""Where a run's large artefacts live: checkpoints, the final model, the KL reference model.

One interface (:class:`ArtifactStore`), two stores, chosen by the setting
``CRUCIBLE_ARTIFACT_STORE`` (:func:`default_store`):

- unset: :class:`LocalStore` on ``CRUCIBLE_VAR_DIR``, files under ``runs/<id>-<created>/``
  exactly as the trainer writes them (nothing is copied);
- ``file:///absolute/path``: :class:`LocalStore` keeping the durable copies under that path
  (a shared mount), with the trainer's working copies under ``CRUCIBLE_VAR_DIR``;
- ``s3://bucket/prefix``: :class:`S3Store`, objects through the S3 API with boto3 (AWS S3,
  MinIO, Ceph RGW, any S3-compatible server). Credentials, region and endpoint come from the
  standard AWS configuration: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``,
  an instance or pod role; ``AWS_DEFAULT_REGION``; ``AWS_ENDPOINT_URL_S3`` (or
  ``AWS_ENDPOINT_URL``) for a server other than AWS.

Keys are relative POSIX paths mirroring the layout under ``CRUCIBLE_VAR_DIR``
(``runs/7-20260101T120000000000/checkpoints/step-000003``): the trainer reads and writes
its working copy at :meth:`ArtifactStore.local_path` and the store makes it durable. A
trainer pod whose disk is gone finds its checkpoints in the store and downloads the one it
resumes from into the working copy's place.

Directory artefacts (a checkpoint, a saved model) are complete or absent. A local store
renames a finished directory into place (atomic on one filesystem). The S3 store uploads
every file, then the manifest :data:`MANIFEST` (file names and sizes) last, and lists only
directories whose manifest is there: a checkpoint whose upload was cut off (the pod killed
half way) is never resumed from. Files above ``multipart_threshold`` bytes travel as
multipart uploads and ranged downloads (boto3's managed transfer), each request carrying
boto3's default CRC checksum.

Every failure of the store raises :class:`ArtifactStoreError` whose message names the
store's URL and what to fix (the bucket is missing, access is denied, the endpoint is
unreachable, no credentials): the trainer records it as the run's failure reason.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings

MANIFEST = "_manifest.json"
"""The object an S3 directory artefact ends with:
``{"format", "files": {name: size in bytes}, ...}``."""
MANIFEST_FORMAT = "crucible-artifact-dir/1"
SETTING = "CRUCIBLE_ARTIFACT_STORE"
MiB = 2**20


class ArtifactStoreError(RuntimeError):
    """The store cannot do what was asked: a bad store URL, a missing bucket, denied access,
    an unreachable endpoint, missing credentials. The message names the store and the fix."""


class ArtifactNotFound(ArtifactStoreError):
    """The artefact asked for is not in the store."""


def _temporary(name: str) -> bool:
    """Working names that never count as artefacts: ``step-000003.tmp``, ``x.tmp-12``,
    ``x.download-12``."""
    return name.startswith(".") or ".tmp" in name or ".download-" in name


def _check_key(key: str) -> str:
    path = PurePosixPath(key)
    if not key or path.is_absolute() or ".." in path.parts:
        raise ValueError(f"artefact key {key!r} must be a relative path without '..'")
    return path.as_posix()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def replace_dir(source: Path, destination: Path) -> None:
    """Rename the complete directory ``source`` to ``destination`` (same filesystem), replacing
    what is there; the directory entries are fsynced, so the rename survives a power loss."""
    if destination.exists():  # a step redone after a crash between publish and the step record
        shutil.rmtree(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    _fsync_dir(source)
    os.rename(source, destination)
    _fsync_dir(destination.parent)


def _files(directory: Path) -> dict[str, int]:
    """``{relative POSIX name: size in bytes}`` of every file under ``directory``."""
    return {
        p.relative_to(directory).as_posix(): p.stat().st_size
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _copy_dir(source: Path, destination: Path) -> None:
    """Copy a directory into place atomically: into ``<destination>.tmp-<pid>``, files fsynced, then
    renamed."""
    temporary = destination.parent / f"{destination.name}.tmp-{os.getpid()}"
    if temporary.exists():
        shutil.rmtree(temporary)
    shutil.copytree(source, temporary)
    for name in _files(temporary):
        _fsync_file(temporary / name)
    replace_dir(temporary, destination)


def _copy_file(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    temporary = destination.parent / f"{destination.name}.tmp-{os.getpid()}"
    shutil.copyfile(source, temporary)
    _fsync_file(temporary)
    os.replace(temporary, destination)


class ArtifactStore(ABC):
    """A durable home for a run's artefacts, with the trainer's working copies under ``cache_root``.

    ``url`` names the store in messages; ``cache_root`` is ``CRUCIBLE_VAR_DIR``. Keys are
    relative POSIX paths (``runs/<run>/checkpoints/step-000003``).
    """

    url: str
    cache_root: Path

    def local_path(self, key: str) -> Path:
        """Where the working copy of ``key`` lies on this host."""
        return self.cache_root / _check_key(key)

    def key_of(self, path: Path) -> str:
        """The key of the working copy at ``path``.

        Raises:
            ValueError: ``path`` is not under ``cache_root``.
        """
        try:
            return Path(path).relative_to(self.cache_root).as_posix()
        except ValueError:
            try:
                return Path(path).resolve().relative_to(self.cache_root).as_posix()
            except ValueError:
                raise ValueError(
                    f"{path} is not under {self.cache_root} (CRUCIBLE_VAR_DIR): the artefact "
                    f"store mirrors that directory only"
                ) from None

    @abstractmethod
    def location(self, key: str) -> str:
        """Where the durable copy of ``key`` is, for people and run summaries (a path or an
        ``s3://`` URL)."""

    @abstractmethod
    def check(self, key: str) -> None:
        """Make sure the store can be read and written under ``key`` (a probe is written and
        deleted).

        Raises:
            ArtifactStoreError: it cannot, saying why and what to fix.
        """

    @abstractmethod
    def put_dir(self, source: Path, key: str) -> str:
        """Make the complete local directory ``source`` the directory artefact ``key``; return its
        location.

        ``source`` stays where it is. A crash half way leaves ``key`` incomplete, and an incomplete
        directory is never listed by :meth:`complete_dirs` nor fetched.
        """

    def publish_dir(self, staging: Path, key: str) -> Path:
        """Store the complete directory ``staging`` as ``key``, then move it to ``local_path(key)``.

        Returns:
            ``local_path(key)``: the working copy, now durable.
        """
        self.put_dir(staging, key)
        final = self.local_path(key)
        replace_dir(staging, final)
        return final

    @abstractmethod
    def complete_dirs(self, key: str) -> list[str]:
        """Names of the complete directory artefacts directly under ``key``, sorted; [] when there
        are none."""

    def incomplete_dirs(self, key: str) -> list[str]:
        """Names of directories under ``key`` holding files but no completion mark (an upload or a
        deletion cut off half way), sorted. A local store has none: its staging directories are
        recycled by the next writer."""
        return []

    @abstractmethod
    def fetch_dir(self, key: str) -> Path:
        """A complete working copy of directory artefact ``key`` at ``local_path(key)`` (downloaded
        if needed).

        Raises:
            ArtifactNotFound: the store holds no complete ``key``.
        """

    @abstractmethod
    def delete_dir(self, key: str) -> None:
        """Delete directory artefact ``key`` and its working copy (no error when absent)."""

    @abstractmethod
    def put_file(self, key: str) -> str:
        """Make the working copy ``local_path(key)`` (a complete file) durable; return its
        location."""

    @abstractmethod
    def fetch_file(self, key: str) -> Path:
        """The working copy of file artefact ``key``, downloaded if it is not on this host.

        Raises:
            ArtifactNotFound: neither here nor in the store.
        """


class LocalStore(ArtifactStore):
    """Artefacts as files under ``root``; in place (no copies) when ``root`` is ``cache_root``.

    With another ``root`` (a shared mount) every artefact is copied there atomically
    (temporary name, fsync, rename) and read back from there into the working copy.
    """

    def __init__(self, root: Path, *, cache_root: Path | None = None):
        self.root = Path(root)
        self.cache_root = Path(cache_root) if cache_root is not None else self.root
        self.url = self.root.as_uri() if self.root.is_absolute() else str(self.root)

    @property
    def in_place(self) -> bool:
        return self.root == self.cache_root

    def durable_path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def location(self, key: str) -> str:
        return str(self.durable_path(key))

    def check(self, key: str) -> None:
        directory = self.durable_path(key)
        if self.in_place:  # the trainer writes its working copy there anyway
            return
        probe = directory / f".write-check-{os.getpid()}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError as exc:
            raise ArtifactStoreError(
                f"artefact store {self.url}: cannot write {directory}: {exc.strerror or exc}; "
                f"make it writable or point {SETTING} elsewhere"
            ) from exc

    def put_dir(self, source: Path, key: str) -> str:
        destination = self.durable_path(key)
        if Path(source).resolve() != destination.resolve():
            _copy_dir(Path(source), destination)
        return str(destination)

    def publish_dir(self, staging: Path, key: str) -> Path:
        if self.in_place:  # the staging directory is renamed into place: no copy
            final = self.local_path(key)
            replace_dir(staging, final)
            return final
        return super().publish_dir(staging, key)

    def complete_dirs(self, key: str) -> list[str]:
        directory = self.durable_path(key)
        if not directory.is_dir():
            return []
        return sorted(p.name for p in directory.iterdir() if p.is_dir() and not _temporary(p.name))

    def fetch_dir(self, key: str) -> Path:
        durable, local = self.durable_path(key), self.local_path(key)
        if not durable.is_dir():
            raise ArtifactNotFound(f"artefact store {self.url}: {durable} does not exist")
        if not self.in_place and (not local.is_dir() or _files(local) != _files(durable)):
            _copy_dir(durable, local)
        return local

    def delete_dir(self, key: str) -> None:
        shutil.rmtree(self.durable_path(key), ignore_errors=True)
        shutil.rmtree(self.local_path(key), ignore_errors=True)

    def put_file(self, key: str) -> str:
        destination = self.durable_path(key)
        if not self.in_place:
            _copy_file(self.local_path(key), destination)
        return str(destination)

    def fetch_file(self, key: str) -> Path:
        local = self.local_path(key)
        if local.is_file():
            return local
        durable = self.durable_path(key)
        if self.in_place or not durable.is_file():
            raise ArtifactNotFound(f"artefact store {self.url}: {durable} does not exist")
        _copy_file(durable, local)
        return local


# --- S3 ---------------------------------------------------------------------------------------

_DENIED = {
    "AccessDenied",
    "403",
    "Forbidden",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "AccountProblem",
    "InvalidSecurity",
}
_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}


class S3Store(ArtifactStore):
    """Artefacts as objects ``s3://bucket/prefix/<key>`` through boto3 (any S3-compatible server).

    Args:
        bucket, prefix: where the objects go (``prefix`` may be empty).
        cache_root: the working copies' root (``CRUCIBLE_VAR_DIR``).
        multipart_threshold: files above this many bytes go in parts (multipart upload,
            ranged download); S3 needs parts of at least 5 MiB.
        multipart_chunksize: bytes per part (boto3 raises it for files that would need more than
            10,000 parts).
        max_concurrency: parts in flight at once per file.
        client: a boto3 S3 client; default: one from the standard AWS configuration
            (environment, ``~/.aws``, the pod's or instance's role; ``AWS_ENDPOINT_URL_S3``).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        cache_root: Path,
        multipart_threshold: int = 64 * MiB,
        multipart_chunksize: int = 64 * MiB,
        max_concurrency: int = 8,
        client=None,
    ):
        # Imported here: boto3 takes a quarter of a second to load, and only an S3 store needs it.
        import boto3  # noqa: PLC0415
        from boto3.s3.transfer import TransferConfig  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.cache_root = Path(cache_root)
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        # Fail within seconds on a dead endpoint rather than botocore's default minute per try;
        # retries follow the standard AWS_RETRY_MODE / AWS_MAX_ATTEMPTS settings.
        self.client = client or boto3.session.Session().client(
            "s3", config=Config(connect_timeout=10, read_timeout=120, user_agent_extra="crucible")
        )
        self.transfer = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=max_concurrency,
        )

    # -- errors: every boto3 failure becomes an ArtifactStoreError that says what to fix --

    @property
    def endpoint(self) -> str:
        return self.client.meta.endpoint_url

    @contextmanager
    def _calls(self, doing: str):
        # Imported here, as in __init__: only an S3 store needs boto3.
        from boto3.exceptions import RetriesExceededError, S3UploadFailedError  # noqa: PLC0415
        from botocore.exceptions import (  # noqa: PLC0415
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            ParamValidationError,
            PartialCredentialsError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError  # noqa: PLC0415

        try:
            yield
        except ArtifactStoreError:
            raise
        except (S3UploadFailedError, RetriesExceededError, ClientError, BotoCoreError) as exc:
            cause = exc
            if isinstance(exc, S3UploadFailedError) and isinstance(exc.__context__, ClientError):
                cause = exc.__context__
            elif isinstance(exc, RetriesExceededError) and exc.last_exception is not None:
                cause = exc.last_exception
            where = f"artefact store {self.url} (endpoint {self.endpoint})"
            if isinstance(cause, ClientError):
                error = cause.response.get("Error", {})
                code = str(error.get("Code", ""))
                status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code == "NoSuchBucket" or (
                    doing.startswith("checking the bucket") and status == 404
                ):
                    raise ArtifactStoreError(
                        f"{where}: bucket {self.bucket!r} does not exist; create it (aws s3 mb "
                        f"s3://{self.bucket}, or mc mb for MinIO) or point {SETTING} at an "
                        "existing bucket"
                    ) from exc
                if code in _DENIED or status == 403:
                    raise ArtifactStoreError(
                        f"{where}: access denied ({code or status}) while {doing}; check the "
                        "credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or "
                        "the pod's role) and that they may s3:ListBucket, s3:GetObject, "
                        f"s3:PutObject and s3:DeleteObject on {self.url}"
                    ) from exc
                if code in _MISSING_KEY or status == 404:
                    raise ArtifactNotFound(f"{where}: not found while {doing}") from exc
                message = error.get("Message") or str(cause)
                raise ArtifactStoreError(
                    f"{where}: S3 answered {status} {code} while {doing}: {message}"
                ) from exc
            if isinstance(cause, (NoCredentialsError, PartialCredentialsError)):
                raise ArtifactStoreError(
                    f"{where}: no usable AWS credentials while {doing} ({cause}); set "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or give the "
                    "pod an IAM role)"
                ) from exc
            if isinstance(cause, BotoConnectionError):
                raise ArtifactStoreError(
                    f"{where}: cannot reach the endpoint while {doing} ({cause}); check "
                    "AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL), AWS_DEFAULT_REGION and the "
                    "network"
                ) from exc
            if isinstance(cause, ParamValidationError):
                raise ArtifactStoreError(
                    f"{where}: {cause}; fix {SETTING} (s3://bucket/prefix)"
                ) from exc
            raise ArtifactStoreError(
                f"{where}: {type(cause).__name__} while {doing}: {cause}"
            ) from exc

    # -- keys and objects --

    def object_key(self, key: str) -> str:
        key = _check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.object_key(key)}"

    def _objects(self, prefix: str) -> list[str]:
        """Every object key under ``prefix`` (a key ending in ``/``), all pages."""
        keys: list[str] = []
        with self._calls(f"listing s3://{self.bucket}/{prefix}"):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            ):
                keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def _delete_objects(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = keys[start : start + 1000]
            with self._calls(f"deleting {len(batch)} object(s) under {self.url}"):
                answer = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise ArtifactStoreError(
                    f"artefact store {self.url}: could not delete {len(errors)} object(s), first "
                    f"s3://{self.bucket}/{first.get('Key')}: {first.get('Code')} "
                    f"{first.get('Message', '')}"
                )

    def _upload(self, path: Path, key: str) -> None:
        object_key = self.object_key(key)
        with self._calls(f"uploading {path} to s3://{self.bucket}/{object_key}"):
            self.client.upload_file(str(path), self.bucket, object_key, Config=self.transfer)

    def _download(self, key: str, destination: Path) -> None:
        """Download ``key`` to ``destination`` through a temporary name (a reader never sees half a
        file)."""
        object_key = self.object_key(key)
        destination.parent.mkdir(parents=True, exist_ok=True)
        temporary = destination.parent / f"{destination.name}.download-{os.getpid()}"
        with self._calls(f"downloading s3://{self.bucket}/{object_key}"):
            self.client.download_file(self.bucket, object_key, str(temporary), Config=self.transfer)
        os.replace(temporary, destination)

    def manifest(self, key: str) -> dict:
        """The manifest of directory artefact ``key``.

        Raises:
            ArtifactNotFound: ``key`` has none (absent, or its upload never finished).
        """
        object_key = self.object_key(f"{key}/{MANIFEST}")
        with self._calls(f"reading s3://{self.bucket}/{object_key}"):
            body = self.client.get_object(Bucket=self.bucket, Key=object_key)["Body"].read()
        try:
            manifest = json.loads(body)
            if manifest.get("format") != MANIFEST_FORMAT or not isinstance(
                manifest.get("files"), dict
            ):
                raise ValueError(f"format {manifest.get('format')!r}")
        except (ValueError, AttributeError) as exc:
            raise ArtifactStoreError(
                f"artefact store {self.url}: s3://{self.bucket}/{object_key} is not a "
                f"{MANIFEST_FORMAT} manifest ({exc}); delete the directory and write it again"
            ) from exc
        return manifest

    # -- the interface --

    def check(self, key: str) -> None:
        with self._calls(f"checking the bucket {self.bucket!r}"):
            self.client.head_bucket(Bucket=self.bucket)
        probe = self.object_key(f"{key}/.write-check-{socket.gethostname()}-{os.getpid()}")
        with self._calls(f"writing and deleting the probe s3://{self.bucket}/{probe}"):
            self.client.put_object(Bucket=self.bucket, Key=probe, Body=b"ok")
            self.client.delete_object(Bucket=self.bucket, Key=probe)
        self._objects(self.object_key(key) + "/")

    def put_dir(self, source: Path, key: str) -> str:
        source = Path(source)
        files = _files(source)
        base = self.object_key(key) + "/"
        manifest_key = base + MANIFEST
        # The old manifest goes first: a directory redone in place is incomplete until its new one
        # lands.
        with self._calls(f"deleting s3://{self.bucket}/{manifest_key}"):
            self.client.delete_object(Bucket=self.bucket, Key=manifest_key)
        started = time.monotonic()
        for name in files:
            self._upload(source / name, f"{key}/{name}")
        stale = [
            k for k in self._objects(base) if k != manifest_key and k[len(base) :] not in files
        ]
        if stale:
            self._delete_objects(stale)
        manifest = {
            "format": MANIFEST_FORMAT,
            "files": files,
            "bytes": sum(files.values()),
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "writer": f"{socket.gethostname()}:{os.getpid()}",
            "upload_seconds": round(time.monotonic() - started, 3),
        }
        with self._calls(f"writing s3://{self.bucket}/{manifest_key}"):
            self.client.put_object(
                Bucket=self.bucket,
                Key=manifest_key,
                Body=json.dumps(manifest, indent=1).encode(),
                ContentType="application/json",
            )
        return self.location(key)

    def _dirs(self, key: str) -> tuple[set[str], set[str]]:
        """(names of every directory under ``key``, names of those with a manifest)."""
        base = self.object_key(key) + "/"
        every, complete = set(), set()
        for object_key in self._objects(base):
            parts = object_key[len(base) :].split("/")
            if len(parts) >= 2 and not _temporary(parts[0]):
                every.add(parts[0])
                if len(parts) == 2 and parts[1] == MANIFEST:
                    complete.add(parts[0])
        return every, complete

    def complete_dirs(self, key: str) -> list[str]:
        return sorted(self._dirs(key)[1])

    def incomplete_dirs(self, key: str) -> list[str]:
        every, complete = self._dirs(key)
        return sorted(every - complete)

    def fetch_dir(self, key: str) -> Path:
        files = self.manifest(key)["files"]
        local = self.local_path(key)
        if local.is_dir() and _files(local) == files:  # this host wrote or fetched it already
            return local
        temporary = local.parent / f"{local.name}.download-{os.getpid()}"
        if temporary.exists():
            shutil.rmtree(temporary)
        for name, size in files.items():
            destination = temporary / _check_key(name)
            self._download(f"{key}/{name}", destination)
            if destination.stat().st_size != size:
                raise ArtifactStoreError(
                    f"artefact store {self.url}: {self.location(key)}/{name} holds "
                    f"{destination.stat().st_size} bytes, its manifest says {size}: it was "
                    f"rewritten during the download; retry"
                )
        temporary.mkdir(parents=True, exist_ok=True)  # a directory artefact may hold no file
        replace_dir(temporary, local)
        return local

    def delete_dir(self, key: str) -> None:
        base = self.object_key(key) + "/"
        manifest_key = base + MANIFEST
        # The manifest first: a listing never reports a directory whose files are half deleted.
        with self._calls(f"deleting s3://{self.bucket}/{manifest_key}"):
            self.client.delete_object(Bucket=self.bucket, Key=manifest_key)
        rest = self._objects(base)
        if rest:
            self._delete_objects(rest)
        shutil.rmtree(self.local_path(key), ignore_errors=True)

    def put_file(self, key: str) -> str:
        self._upload(self.local_path(key), key)  # an object appears whole or not at all
        return self.location(key)

    def fetch_file(self, key: str) -> Path:
        local = self.local_path(key)
        if not local.is_file():
            self._download(key, local)
        return local


# --- which store ---------------------------------------------------------------------------------


def store_from_url(
    url: str,
    *,
    cache_root: Path,
    multipart_threshold: int = 64 * MiB,
    multipart_chunksize: int = 64 * MiB,
) -> ArtifactStore:
    """The store ``url`` names: ``""`` (files under ``cache_root``), ``file:///path`` or
    ``s3://bucket/prefix``.

    Raises:
        ArtifactStoreError: ``url`` is none of these (the message names the setting and the forms).
    """
    url = (url or "").strip()
    if not url:
        return LocalStore(cache_root)
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ArtifactStoreError(
                f"{SETTING}={url!r}: a file store needs an absolute path, e.g. file:///mnt/crucible"
            )
        root = Path(parts.path)
        return LocalStore(root, cache_root=cache_root)
    if parts.scheme == "s3":
        if not parts.netloc or parts.query or parts.fragment:
            raise ArtifactStoreError(
                f"{SETTING}={url!r}: an S3 store is s3://BUCKET or s3://BUCKET/PREFIX"
            )
        return S3Store(
            parts.netloc,
            parts.path,
            cache_root=cache_root,
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
        )
    raise ArtifactStoreError(
        f"{SETTING}={url!r}: unknown scheme {parts.scheme!r}; use s3://bucket/prefix, "
        f"file:///absolute/path, or leave it unset for files under CRUCIBLE_VAR_DIR"
    )


_stores: dict[tuple, ArtifactStore] = {}


def default_store() -> ArtifactStore:
    """The store the settings name (``CRUCIBLE_ARTIFACT_STORE``), one per process and setting.

    Raises:
        ArtifactStoreError: the setting is malformed.
    """
    key = (
        getattr(settings, "CRUCIBLE_ARTIFACT_STORE", ""),
        Path(settings.VAR_DIR),
        getattr(settings, "CRUCIBLE_S3_MULTIPART_THRESHOLD_BYTES", 64 * MiB),
        getattr(settings, "CRUCIBLE_S3_MULTIPART_CHUNKSIZE_BYTES", 64 * MiB),
    )
    if key not in _stores:
        _stores[key] = store_from_url(
            key[0], cache_root=key[1], multipart_threshold=key[2], multipart_chunksize=key[3]
        )
    return _stores[key]
