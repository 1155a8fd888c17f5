"""Environment names are slugs (letters, digits, '.', '_', '-'): a '../' or a newline is refused
at import and in the API, naming the field. A name stored before (an old database) cannot make
environment_image write outside its output directory, nor inject a line into the Dockerfile."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from dockerfile_parse import DockerfileParser

from tasks_library.importers.crucible import examples_path
from tasks_library.models import EnvironmentVersion, Task
from tests.tasks_library.conftest import client_for

BAD = ["../../escape", "x\nRUN touch /tmp/crucible-injected", "a/b", "", ".hidden", "x" * 101]


@pytest.mark.django_db
@pytest.mark.parametrize("name", BAD)
def test_an_import_refuses_a_name_that_is_not_a_slug(write_jsonl, name):
    line = json.loads(examples_path().read_text().splitlines()[0])
    line["environment"] = {**line["environment"], "name": name}
    path = write_jsonl([line])
    with pytest.raises(CommandError, match=r"tasks.jsonl:1: field 'environment.name': .* is not"):
        call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", [n for n in BAD if n])
def test_the_api_refuses_a_name_that_is_not_a_slug(curator, name):
    reply = client_for(curator).post(
        "/api/environments/", {"name": name, "runtime": "python3.11", "packages": []}, format="json"
    )
    assert reply.status_code == 400, reply.content
    assert reply.json()["field"] == "name" and "is not an environment name" in reply.json()["error"]
    assert not EnvironmentVersion.objects.exists()


@pytest.mark.django_db
def test_slugs_still_import(curator):
    reply = client_for(curator).post(
        "/api/environments/",
        {"name": "python3.11_data-v2", "runtime": "python3.11", "packages": []},
        format="json",
    )
    assert reply.status_code == 201, reply.content


@pytest.mark.django_db
def test_an_old_name_writes_nothing_outside_and_injects_no_line(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    call_command("import_tasks", "--format", "crucible", str(examples_path()), stdout=StringIO())
    hostile = "../../../escaped\nRUN touch /tmp/crucible-injected\nUSER root"
    EnvironmentVersion.objects.update(name=hostile)  # as an old database may hold it
    call_command("environment_image", str(EnvironmentVersion.objects.first().pk), stdout=StringIO())
    images = tmp_path / "var" / "images"
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("Dockerfile"))
    assert len(written) == 1 and written[0].parent.parent == images.relative_to(tmp_path)
    parser = DockerfileParser(path=str(images / written[0].parent.name / "Dockerfile"))
    instructions = [(i["instruction"], i["value"]) for i in parser.structure]
    runs = [value for kind, value in instructions if kind == "RUN"]
    assert runs and not any("crucible-injected" in value for value in runs)
    label = next(value for kind, value in instructions if kind == "LABEL")
    assert "\\nRUN touch" in label  # the name, escaped, inside its one LABEL
    assert [value for kind, value in instructions if kind == "USER"] == ["root", "10001:10001"]
