"""A commit's files, read out of a git repository from outside without running anything of it.

``git archive`` in a user's repository applies that repository's filter drivers (a
``.gitattributes`` line and a ``filter.<name>.smudge`` or ``.process`` command in its config),
and any git command there reads its configuration (``core.fsmonitor``, hooks, ``include.path``).
So git never runs in the repository from outside. Instead, a scratch bare repository of
Crucible's own borrows its objects (``objects/info/alternates`` names the repository's object
directory) and a copy of its refs (plain text files, copied as data), and git runs there, with
:func:`core.gitenv.clean_git_env` and nothing of the repository's config, attributes,
hooks or info files: ``rev-parse`` resolves the commit, ``ls-tree -r -z`` lists the tree and
``cat-file --batch`` hands over each blob's stored bytes (no filter, no conversion: the bytes
the commit records). Submodules and symbolic links are left out, as ``.git`` is.

Every bound holds while reading: the number of entries as ``ls-tree`` lists them, each blob's
size from ``cat-file``'s header before its bytes are read, the total.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from core.archives import ArchiveLimits
from core.gitenv import clean_git_env
from core.names import name_problem, printable

GIT_TIMEOUT_S = 600
MAX_REF_FILES = 100_000
MAX_REF_FILE_BYTES = 4096
MAX_PACKED_REFS_BYTES = 256 * 1024**2
OBJECT_FORMATS = ("sha1", "sha256")


class GitReadError(ValueError):
    """The repository cannot be read at the commit asked for (the message says why)."""


def git_directory(path: Path) -> Path | None:
    """The git directory of ``path`` (a work tree whose ``.git`` is a directory or a
    ``gitdir:`` file, or a bare repository), or None when it is none of them."""
    dot_git = path / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file():
        text = dot_git.read_text(errors="replace")[:4096].strip()
        if text.startswith("gitdir:"):
            found = (path / text.removeprefix("gitdir:").strip()).resolve()
            return found if found.is_dir() else None
        return None
    if (path / "objects").is_dir() and (path / "HEAD").is_file() and (path / "refs").is_dir():
        return path
    return None


def _common_directory(git_dir: Path) -> Path:
    """Where a linked work tree's objects and refs live (``commondir``), else ``git_dir``."""
    common = git_dir / "commondir"
    if common.is_file():
        found = (git_dir / common.read_text(errors="replace")[:4096].strip()).resolve()
        if found.is_dir():
            return found
    return git_dir


def _object_format(common: Path, env: dict) -> str:
    """``extensions.objectformat`` of the repository's config, read as a file of data
    (``git config --file`` follows no include and runs nothing)."""
    config = common / "config"
    if not config.is_file():
        return "sha1"
    done = subprocess.run(
        ["git", "config", "--file", str(config), "--get", "extensions.objectformat"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    found = done.stdout.decode("ascii", "replace").strip().lower() or "sha1"
    if found not in OBJECT_FORMATS:
        raise GitReadError(f"the repository's object format {found!r} is not one git reads")
    return found


def _copy_refs(common: Path, git_dir: Path, scratch: Path) -> None:
    """The repository's refs, ``packed-refs`` and ``HEAD`` copied into ``scratch`` as data:
    regular files only (links are not followed), bounded in number and size."""
    copied = 0
    refs = common / "refs"
    for current, dirs, files in os.walk(refs, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(current, d))]
        for name in files:
            source = Path(current) / name
            if source.is_symlink() or not source.is_file():
                continue
            copied += 1
            if copied > MAX_REF_FILES:
                raise GitReadError(f"the repository has more than {MAX_REF_FILES} ref files")
            if source.stat().st_size > MAX_REF_FILE_BYTES:
                continue  # not a ref git would read
            target = scratch / "refs" / source.relative_to(refs)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    packed = common / "packed-refs"
    if packed.is_file() and not packed.is_symlink():
        if packed.stat().st_size > MAX_PACKED_REFS_BYTES:
            raise GitReadError(
                f"the repository's packed-refs is over {MAX_PACKED_REFS_BYTES} bytes"
            )
        shutil.copyfile(packed, scratch / "packed-refs")
    head = git_dir / "HEAD"
    if head.is_file() and not head.is_symlink() and head.stat().st_size <= MAX_REF_FILE_BYTES:
        (scratch / "HEAD").write_bytes(head.read_bytes())


class _Scratch:
    """The scratch bare repository that borrows a repository's objects (see the module)."""

    def __init__(self, path: Path, workdir: Path) -> None:
        git_dir = git_directory(path)
        if git_dir is None:
            raise GitReadError(f"{str(path)!r} is not a git repository")
        common = _common_directory(git_dir)
        objects = common / "objects"
        if not objects.is_dir():
            raise GitReadError(f"{str(path)!r} has no object directory")
        self.home = workdir / "home"
        self.home.mkdir()
        self.root = workdir / "repository.git"
        self.env = clean_git_env(str(self.home))
        form = _object_format(common, self.env)
        self.env["GIT_DIR"] = str(self.root)
        self.run(
            "init", "--bare", "--quiet", "--template=", f"--object-format={form}", str(self.root)
        )
        (self.root / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (self.root / "objects" / "info" / "alternates").write_text(str(objects.resolve()) + "\n")
        _copy_refs(common, git_dir, self.root)

    def run(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", *args],
            input=stdin,
            capture_output=True,
            env=self.env,
            cwd=self.home,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )

    def resolve(self, commit: str) -> str | None:
        done = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}"
        )
        return done.stdout.decode("ascii", "replace").strip() if done.returncode == 0 else None

    def entries(self, sha: str, limits: ArchiveLimits) -> Iterator[tuple[str, str, str]]:
        """``(mode, blob id, path)`` of each regular file of ``sha``'s tree, listed as ``ls-tree``
        streams them (stopped past ``limits.members`` entries of any kind)."""
        process = subprocess.Popen(
            ["git", "ls-tree", "-r", "-z", "--full-tree", sha],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
            cwd=self.home,
        )
        count, pending = 0, b""
        try:
            while chunk := process.stdout.read(1 << 16):
                pending += chunk
                *records, pending = pending.split(b"\0")
                for record in records:
                    count += 1
                    if count > limits.members:
                        raise GitReadError(f"the tree has more than {limits.members} entries")
                    meta, _, raw_path = record.partition(b"\t")
                    mode, kind, blob = meta.decode("ascii").split()
                    try:
                        name = raw_path.decode("utf-8")
                    except UnicodeDecodeError:
                        shown = raw_path.decode("utf-8", "backslashreplace")
                        raise GitReadError(
                            f"file name {shown!r} is not valid UTF-8; rename it"
                        ) from None
                    if kind == "blob" and mode in ("100644", "100755"):
                        yield mode, blob, name
        finally:
            process.kill()
            process.wait()

    def blobs(self, ids: list[str], limits: ArchiveLimits, names: list[str]) -> Iterator[bytes]:
        """Each blob's stored bytes, in order; its size from ``cat-file``'s header is checked
        against the limits before its bytes are read."""
        process = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
            cwd=self.home,
        )

        def feed() -> None:
            try:
                for blob in ids:
                    process.stdin.write(blob.encode() + b"\n")
                process.stdin.close()
            except OSError:
                pass  # stopped early: the reader refused something

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        total = 0
        try:
            for blob, name in zip(ids, names, strict=True):
                header = process.stdout.readline().decode("ascii", "replace").split()
                if len(header) != 3 or header[1] != "blob":
                    raise GitReadError(f"object {blob} of {printable(name)} cannot be read")
                size = int(header[2])
                if size > limits.file_bytes:
                    raise GitReadError(
                        f"file {printable(name)} is {size} bytes, over the "
                        f"{limits.file_bytes} byte limit"
                    )
                total += size
                if total > limits.total_bytes:
                    raise GitReadError(f"the tree is over {limits.total_bytes} bytes")
                data = process.stdout.read(size)
                process.stdout.read(1)  # the newline after each object
                yield data
        finally:
            process.kill()
            process.wait()
            feeder.join(timeout=5)


def commit_files(path: Path, commit: str, *, limits: ArchiveLimits) -> dict[str, bytes]:
    """The regular files of the repository at ``path`` as of ``commit``, ``{path: bytes}``
    (``.git`` paths, links and submodules left out), read without running any of the
    repository's configuration (see the module).

    Raises:
        GitReadError: not a git repository, ``commit`` is not one of its commits, a name that
            is not UTF-8 or holds a control character, or a bound exceeded.
    """
    if not commit or commit.startswith("-"):
        raise GitReadError(f"base_commit {commit!r} is not a commit name")
    with tempfile.TemporaryDirectory(prefix="crucible-git-read-") as workdir:
        scratch = _Scratch(path, Path(workdir))
        sha = scratch.resolve(commit)
        if sha is None:
            raise GitReadError(
                f"base_commit {commit!r} is not a commit of the repository {str(path)!r} "
                "(fetch it there first; nothing is fetched from the network)"
            )
        listed = []
        for _mode, blob, name in scratch.entries(sha, limits):
            if ".git" in name.split("/"):
                continue
            problem = name_problem(name)
            if problem:
                raise GitReadError(f"file name {printable(name)} {problem}; rename it")
            listed.append((name, blob))
        names = [name for name, _ in listed]
        contents = scratch.blobs([blob for _, blob in listed], limits, names)
        return dict(sorted(zip(names, contents, strict=True)))
