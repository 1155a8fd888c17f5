"""A test id whose file name starts with '-' would reach pytest as an option (it failed closed in
the sandbox); it is refused at import, naming the id. So are ids with control characters."""

import pytest

from tasks_library.importers import ImportFormatError
from tasks_library.models import Task
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.repository_helpers import BUGGY, FAIL_TO_PASS, record

OPTION_FILE = b"def test_x():\n    assert True\n"


@pytest.mark.django_db
@pytest.mark.parametrize("node_id", ["-p.py::test_x", "--pdb::test_x", "tests/-k.py::test_x", "-x"])
def test_an_id_naming_an_option_is_refused(node_id):
    files = {**BUGGY, node_id.split("::")[0]: OPTION_FILE}
    with pytest.raises(ImportFormatError) as caught:
        repository_tasks_import([record(files=files, pass_to_pass=[node_id])])
    assert "record 1 (calc/clamp-1): field 'pass_to_pass'" in str(caught.value)
    assert f"test id {node_id!r} names a file starting with '-'" in str(caught.value)
    assert caught.value.field == "pass_to_pass"
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_an_id_with_a_control_character_is_refused():
    with pytest.raises(ImportFormatError, match=r"test id 'tests/test_ops.py::test_\\x1b' holds"):
        repository_tasks_import([record(fail_to_pass=["tests/test_ops.py::test_\x1b"])])
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_ordinary_ids_still_import():
    files = {**BUGGY, "tests/test_a-b.py": OPTION_FILE}
    repository_tasks_import(
        [record(files=files, fail_to_pass=FAIL_TO_PASS, pass_to_pass=["tests/test_a-b.py::test_x"])]
    )
    assert Task.objects.count() == 1
