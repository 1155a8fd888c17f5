"""A run configuration's host paths (sft_data, model_path) must lie in their directories
(CRUCIBLE_SFT_DATA_DIR, CRUCIBLE_MODEL_DIR); a path elsewhere is refused by its spelling, with
the same answer whether the file exists or not, so an operator learns nothing of the host's
files. A path inside works as before."""

import pytest

from tests.console.test_run_launch_form import launched, one_task_set  # noqa: F401 (fixture)
from tests.console.test_runs_api import operator  # noqa: F401 (fixture)
from tests.tasks_library.conftest import roles  # noqa: F401 (fixture)
from training.config import ConfigError, RunConfig
from training.models import TrainingRun

PAIRS = {
    "sft_data": [("/etc/passwd", "/etc/no-such-file"), ("../../etc/passwd", "../../etc/nope")],
    "model_path": [("/usr/lib", "/usr/no-such-dir"), ("../../usr/lib", "../../usr/nope")],
}


def answer(key: str, value: str) -> str:
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict({key: value})
    return str(caught.value).replace(value, "VALUE")


@pytest.mark.parametrize(
    ("key", "existing", "missing"), [(k, e, m) for k, pairs in PAIRS.items() for e, m in pairs]
)
def test_a_path_outside_its_directory_gets_one_answer(key, existing, missing, tmp_path, settings):
    settings.SFT_DATA_DIR, settings.MODEL_DIR = tmp_path / "sft", tmp_path / "models"
    first, second = answer(key, existing), answer(key, missing)
    assert first == second
    assert f"config key '{key}': 'VALUE' is not inside" in first


@pytest.mark.django_db
def test_the_api_gives_one_answer_too(tmp_path, settings, operator, launched):
    settings.SFT_DATA_DIR = tmp_path
    one_task_set("api-set")
    bodies = []
    for value in ("/etc/passwd", "/etc/no-such-file"):
        reply = operator.post(
            "/api/runs/",
            {"task_set": "api-set", "steps": 1, "config": {"sft_data": value}},
            format="json",
        )
        assert reply.status_code == 400, reply.content
        bodies.append(reply.json()["error"].replace(value, "VALUE"))
    assert bodies[0] == bodies[1] and "is not inside" in bodies[0]
    assert not TrainingRun.objects.exists() and launched == []


def test_a_path_inside_its_directory_works(tmp_path, settings):
    settings.SFT_DATA_DIR = tmp_path
    (tmp_path / "demos.jsonl").write_text('{"task_id": "t", "completion": "x"}\n')
    config = RunConfig.from_dict({"sft_data": "demos.jsonl"})
    assert config.sft_data == str(tmp_path / "demos.jsonl")
    assert RunConfig.from_dict({"sft_data": str(tmp_path / "demos.jsonl")}).sft_data == (
        config.sft_data
    )
    with pytest.raises(ConfigError, match="is not a file"):  # inside: said as it is
        RunConfig.from_dict({"sft_data": "other.jsonl"})


def test_a_link_out_of_the_directory_is_refused(tmp_path, settings):
    settings.SFT_DATA_DIR = tmp_path
    (tmp_path / "passwd.jsonl").symlink_to("/etc/passwd")
    with pytest.raises(ConfigError, match="is not inside"):
        RunConfig.from_dict({"sft_data": "passwd.jsonl"})
