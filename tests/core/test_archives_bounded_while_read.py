"""Archives are bounded while they are read, not after a whole listing: a tar.gz of a million
members (an sdist) and a zip whose central directory lists more members than allowed (a
repository) are refused after reading what proves it, in little memory. (Before, a
1M-member tar.gz took 56 s and 820 MB before it was refused: getmembers() came first.)"""

import gzip
import struct
import tarfile
import zlib

import pytest

from core.archives import ArchiveLimits, ArchiveRefused, read_archive
from tasks_library.generators.sdists import SdistError, unpack
from tasks_library.importers.repository_source import RepositorySourceError, tree_at
from tests.allocations import peak_allocated


def many_member_sdist(path):
    """``calc-1.0.tar.gz`` of 300,000 empty members (one header each, 150 MB of tar)."""
    header = tarfile.TarInfo("calc-1.0/a.py").tobuf(format=tarfile.USTAR_FORMAT)
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for _ in range(300):
            handle.write(header * 1000)
        handle.write(b"\0" * 1024)
    return path


def test_a_many_member_sdist_is_refused_while_it_is_read(tmp_path):
    archive = many_member_sdist(tmp_path / "calc-1.0.tar.gz")
    caught = {}

    def read():
        with pytest.raises(SdistError) as error:
            unpack(archive)
        caught["message"] = str(error.value)

    assert peak_allocated(read) < 16 * 1024**2
    assert "refused, nothing was kept" in caught["message"]


def zip_listing(path, count: int, *, claimed: int | None = None):
    """A zip whose central directory lists ``count`` stored empty members (one local entry
    they all point at), its end record claiming ``claimed`` (default ``count``) entries."""
    name = b"calc/a.py"
    local = struct.pack(
        "<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(b""), 0, 0, len(name), 0
    )
    record = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, zlib.crc32(b""), 0, 0, len(name),
        0, 0, 0, 0, 0, 0,
    ) + name  # fmt: skip
    directory = record * count
    start = len(local) + len(name)
    claimed = count if claimed is None else claimed
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, min(claimed, 0xFFFF), min(claimed, 0xFFFF),
        len(directory), start, 0,
    )  # fmt: skip
    path.write_bytes(local + name + directory + end)
    return path


@pytest.mark.parametrize("claimed", [None, 1])  # the end record may say the truth, or lie
def test_a_zip_listing_too_many_members_is_refused_before_it_is_parsed(tmp_path, claimed):
    archive = zip_listing(tmp_path / "calc.zip", 60_000, claimed=claimed)
    caught = {}

    def read():
        with pytest.raises(RepositorySourceError) as error:
            tree_at(archive, None)
        caught["message"] = str(error.value)

    assert peak_allocated(read) < 16 * 1024**2  # zipfile never built 60,000 ZipInfo objects
    assert "has more than 50000 members" in caught["message"]


def test_the_same_zip_within_the_limit_reads(tmp_path):
    limits = ArchiveLimits(members=10, file_bytes=1024, total_bytes=1024)
    small = zip_listing(tmp_path / "small.zip", 3)
    members = list(read_archive(small, label="small.zip", limits=limits))
    assert [m.name for m in members] == ["calc/a.py"] * 3
    with pytest.raises(ArchiveRefused, match="has more than 10 members"):
        list(read_archive(zip_listing(tmp_path / "eleven.zip", 11), label="x", limits=limits))
