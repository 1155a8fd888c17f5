"""A stored workspace file is read on its own and capped: the files API, the task's page and the
version's detail never decode the whole workspace (a zip bomb once made each GET cost 1.36 GB);
an archive that decompresses far beyond its size is refused at import."""

import io
import zipfile

import pytest
from django.core.management import CommandError

from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.allocations import peak_allocated
from tests.tasks_library.conftest import client_for
from tests.tasks_library.repository_helpers import BUGGY, record
from tests.tasks_library.test_import_swe_bench import row, run

BIG = 48 * 1024**2


@pytest.fixture
def big_workspace(db) -> TaskVersion:
    """A stored workspace holding a 48 MiB data file beside the project (stored before the
    import caps existed, or through a record: the reads must not care)."""
    files = {**BUGGY, "data/big.bin": b"\x00" * BIG, "data/long.txt": "é".encode() * 200_000}
    repository_tasks_import([record(files=files)], author="alice")
    return TaskVersion.objects.get()


def test_the_files_api_reads_one_file_without_the_workspace(big_workspace, viewer):
    client = client_for(viewer)
    url = "/api/tasks/calc/clamp-1/versions/1/files/"
    answers = {}

    def get_all():
        answers["file"] = client.get(url, {"path": "calc/ops.py"})
        answers["big"] = client.get(url, {"path": "data/big.bin"})
        answers["dir"] = client.get(url, {"path": "data"})
        answers["detail"] = client.get("/api/tasks/calc/clamp-1/versions/1/")

    peak = peak_allocated(get_all)
    assert peak < BIG // 4, f"{peak} bytes allocated for a 48 MiB workspace"
    assert answers["file"].json()["text"] == BUGGY["calc/ops.py"].decode()
    big = answers["big"].json()
    assert big["size"] == BIG and big["truncated"] and len(big["text"]) == 256 * 1024
    assert answers["dir"].json()["files"] == [
        ["big.bin", "data/big.bin", BIG],
        ["long.txt", "data/long.txt", 400_000],
    ]
    assert "data/big.bin" in answers["detail"].json()["workspace"]["paths"]


def test_a_cut_in_the_middle_of_a_character_is_still_text(big_workspace, viewer):
    body = (
        client_for(viewer)
        .get("/api/tasks/calc/clamp-1/versions/1/files/", {"path": "data/long.txt"})
        .json()
    )
    assert body["truncated"] and body["text"] == "é" * (128 * 1024)


def test_the_page_reads_one_file_without_the_workspace(big_workspace, viewer, client):
    client.force_login(viewer)
    answers = {}

    def get():
        answers["page"] = client.get("/tasks/calc/clamp-1/", {"path": "calc/ops.py"})

    assert peak_allocated(get) < BIG // 4
    assert answers["page"].status_code == 200
    assert "return max(low, x)" in answers["page"].content.decode()


def zip_bomb(path, size: int):
    """One member of ``size`` zero bytes: deflate packs it about a thousand to one."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in BUGGY.items():
            archive.writestr(f"calc-1.0/{name}", content)
        with archive.open("calc-1.0/data/zeros.bin", "w") as handle:
            chunk = b"\0" * (1 << 20)
            for _ in range(size >> 20):
                handle.write(chunk)
    return path


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("size", "why"),
    [
        (400 * 1024**2, "is 419430400 bytes, over the 33554432 byte limit"),  # the bomb
        (30 * 1024**2, "a compression ratio over 100:1"),  # under the file cap: the ratio
    ],
)
def test_a_zip_bomb_is_refused_while_it_is_read(tmp_path, write_jsonl, size, why):
    archive = zip_bomb(tmp_path / "calc.zip", size)
    assert archive.stat().st_size < 1024**2  # hundreds of MiB in well under a megabyte
    path = write_jsonl([row("")], "swe.jsonl")

    def refused():
        with pytest.raises(CommandError) as caught:
            run(path, archive)
        return str(caught.value)

    holder = {}
    peak = peak_allocated(lambda: holder.setdefault("message", refused()))
    assert "calc-1.0/data/zeros.bin" in holder["message"]
    assert why in holder["message"]
    assert peak < 64 * 1024**2  # refused after reading what proves it, not 400 MiB
    assert not TaskVersion.objects.exists()


def test_an_honest_zip_still_imports(tmp_path, write_jsonl, db):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in BUGGY.items():
            archive.writestr(f"calc-1.0/{name}", content)
    (tmp_path / "calc.zip").write_bytes(buffer.getvalue())
    run(write_jsonl([row("")], "swe.jsonl"), tmp_path / "calc.zip")
    assert TaskVersion.objects.get().workspace.files() == dict(sorted(BUGGY.items()))
