"""A repository task's provenance (a generator's nested metadata) is a table of dotted keys and
their values, never a Python dict printed as text; a long value is a block, and a hostile value
stays text."""

import pytest
from django.test import Client
from django.urls import reverse

from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixture)
from tests.tasks_library.repository_helpers import record

METADATA = {
    "package": "cachetools",
    "version": "5.5.0",
    "licence_files": ["LICENSE", "NOTICE"],
    "seed": 7,
    "bug": {"path": "src/cachetools/__init__.py", "line": 118, "kind": "invert_condition"},
    "failures": [{"test": "tests/test_lru.py::test_lru", "message": "assert 3 == 2\n" * 12}],
    "note": "<script>alert(1)</script>",
}


@pytest.mark.django_db
def test_provenance_is_a_table_of_dotted_keys(roles):
    repository_tasks_import([record(metadata=METADATA)], author="alice")
    client = Client()
    client.force_login(make_user("vic", "viewers"))
    page = client.get(reverse("task-detail", args=["calc/clamp-1"])).content.decode()
    provenance = page[
        page.index('id="provenance"') : page.index("</details>", page.index('id="provenance"'))
    ]
    assert "{&#x27;" not in provenance and "{'" not in provenance  # no dict repr
    assert "<th><code>bug.path</code></th><td>src/cachetools/__init__.py</td>" in provenance
    assert "<th><code>bug.line</code></th><td>118</td>" in provenance
    assert "<th><code>licence_files</code></th><td>LICENSE, NOTICE</td>" in provenance
    assert (
        '<th><code>failures.0.message</code></th><td><pre class="code">assert 3 == 2' in provenance
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in provenance and "<script>alert" not in page
