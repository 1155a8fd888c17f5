"""Fetch a project's source distribution from a package index, running none of its code.

``pip download`` of an sdist prepares the project's metadata by running its build backend
(``setup.py``, a PEP 517 hook) on this host. The generator only needs the archive, so it asks the
index itself: the project's page of the simple repository API (PEP 691's JSON, or PEP 503's
HTML), the file whose name is the sdist of exactly that version, downloaded with a size cap and
checked against the sha256 the index gives before it is kept. Nothing of the archive runs; it is
read in memory afterwards (:func:`tasks_library.generators.sdists.unpack`).

The index is ``CRUCIBLE_PACKAGE_INDEX_URL`` (default PyPI, ``https://pypi.org/simple/``); an
``http``, ``https`` or ``file`` URL (a local mirror).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

DEFAULT_INDEX = "https://pypi.org/simple/"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
PAGE_MAX_BYTES = 32 * 1024**2
TIMEOUT_S = 60.0
SCHEMES = ("http", "https", "file")


class PackageIndexError(RuntimeError):
    """The index has no such project or file, answered badly, or a download failed its check.

    Attributes:
        kind: ``unknown_project``, ``no_sdist``, ``bad_hash``, ``too_large`` or ``unreachable``.
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class IndexFile:
    """One file the index lists for a project: its name, absolute URL and sha256 (hex, or
    ``""`` when the index gives none)."""

    filename: str
    url: str
    sha256: str


def index_url() -> str:
    """``CRUCIBLE_PACKAGE_INDEX_URL`` from the settings, default PyPI's simple API."""
    from django.conf import settings  # noqa: PLC0415 (usable before Django is set up)

    return getattr(settings, "PACKAGE_INDEX_URL", DEFAULT_INDEX) or DEFAULT_INDEX


class _Anchors(HTMLParser):
    """PEP 503's project page: one ``<a href="URL#sha256=HEX">FILENAME</a>`` per file."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _open(url: str, *, accept: str = "*/*"):
    scheme = urlparse(url).scheme
    if scheme not in SCHEMES:
        raise PackageIndexError(
            f"{url}: only http, https and file URLs are fetched", kind="unreachable"
        )
    if scheme == "file" and url.endswith("/"):
        url += "index.html"  # a local mirror's project directory
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "crucible"})
    return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # schemes checked above


def _read_capped(response, cap: int, what: str) -> bytes:
    data = response.read(cap + 1)
    if len(data) > cap:
        raise PackageIndexError(f"{what} is over {cap} bytes", kind="too_large")
    return data


def project_files(name: str, *, index: str | None = None) -> list[IndexFile]:
    """The files the index lists for project ``name`` (PEP 691 JSON, or PEP 503 HTML).

    Raises:
        PackageIndexError: the index has no such project (``unknown_project``) or cannot be read
            (``unreachable``).
    """
    base = (index or index_url()).rstrip("/") + "/"
    page = urljoin(base, canonicalize_name(name) + "/")
    try:
        with _open(page, accept=ACCEPT) as response:
            content_type = response.headers.get("Content-Type", "") if response.headers else ""
            body = _read_capped(response, PAGE_MAX_BYTES, f"the index page {page}")
            page = response.geturl() or page
    except (urllib.error.URLError, OSError, ValueError) as exc:  # HTTPError is a URLError
        reason = getattr(exc, "reason", exc)
        if getattr(exc, "code", None) == 404 or isinstance(reason, FileNotFoundError):
            raise PackageIndexError(
                f"the package index {base} has no project {name!r}", kind="unknown_project"
            ) from None
        said = f"answered {exc.code}" if isinstance(exc, urllib.error.HTTPError) else "failed"
        raise PackageIndexError(
            f"the package index {base} {said} for {page}: {reason}", kind="unreachable"
        ) from None
    if content_type.startswith(JSON_TYPE):
        try:
            listed = json.loads(body)["files"]
            return [
                IndexFile(
                    str(item["filename"]),
                    urljoin(page, str(item["url"])),
                    str((item.get("hashes") or {}).get("sha256", "")).lower(),
                )
                for item in listed
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise PackageIndexError(
                f"the index page {page} is not PEP 691 JSON ({exc})", kind="unreachable"
            ) from None
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for href, text in parser.links:
        url, fragment = urldefrag(urljoin(page, href))
        algorithm, _, digest = fragment.partition("=")
        filename = text or os.path.basename(urlparse(url).path)
        files.append(IndexFile(filename, url, digest.lower() if algorithm == "sha256" else ""))
    return files


def sdist_file(name: str, version: str, *, index: str | None = None) -> IndexFile:
    """The index's sdist of exactly ``name==version`` (a ``.tar.gz`` before a ``.zip``).

    Raises:
        PackageIndexError: no such project, or no sdist of that version (``no_sdist``).
    """
    wanted_name, wanted_version = canonicalize_name(name), Version(version)
    found = []
    listed = project_files(name, index=index)
    for item in listed:
        try:
            found_name, found_version = parse_sdist_filename(item.filename)
        except InvalidSdistFilename:
            continue  # a wheel, or another file
        if found_name == wanted_name and found_version == wanted_version:
            found.append(item)
    if not found:
        raise PackageIndexError(
            "the package index has no source distribution of that name and version "
            f"({name}=={version}; it lists {len(listed)} files of the project)",
            kind="no_sdist",
        )
    return sorted(found, key=lambda f: not f.filename.endswith(".tar.gz"))[0]


def download(item: IndexFile, directory: Path, *, max_bytes: int) -> Path:
    """Download ``item`` into ``directory``, kept only when its sha256 matches the index's (and
    written by rename: a reader never sees a partial file).

    Raises:
        PackageIndexError: the index gave no sha256, the file differs from it (``bad_hash``),
            is over ``max_bytes`` (``too_large``), or cannot be fetched (``unreachable``).
    """
    if len(item.sha256) != 64:
        raise PackageIndexError(
            f"the package index gives no sha256 for {item.filename}; Crucible keeps only "
            "downloads it can check",
            kind="bad_hash",
        )
    if "/" in item.filename or item.filename.startswith("."):
        raise PackageIndexError(f"the index names a file {item.filename!r}", kind="unreachable")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / item.filename
    partial = directory / f".{item.filename}.{secrets.token_hex(4)}.part"
    digest = hashlib.sha256()
    size = 0
    try:
        with _open(item.url) as response, open(partial, "wb") as handle:
            while chunk := response.read(1 << 16):
                size += len(chunk)
                if size > max_bytes:
                    raise PackageIndexError(
                        f"{item.filename} is over {max_bytes} bytes; refused", kind="too_large"
                    )
                digest.update(chunk)
                handle.write(chunk)
        if digest.hexdigest() != item.sha256:
            raise PackageIndexError(
                f"{item.filename} does not match the sha256 the index gives "
                f"({digest.hexdigest()} != {item.sha256}); refused",
                kind="bad_hash",
            )
        os.replace(partial, target)
    except (urllib.error.URLError, OSError) as exc:
        raise PackageIndexError(
            f"downloading {item.url} failed: {getattr(exc, 'reason', exc)}", kind="unreachable"
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    return target
