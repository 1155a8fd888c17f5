"""The Dockerfiles under deploy/docker, checked without a Docker engine: parsed with
dockerfile-parse, each one's final stage runs as a numeric non-root user (the uid the
manifests run as), everything it COPYs exists in the repository and survives its
.dockerignore (docker-py's matcher, moby's rules), base images are pinned, and its CMD names a
real management command, Celery app or ASGI application with arguments their parsers accept."""

import json
import shlex
from pathlib import Path

import pytest
from celery.bin.base import CLIContext
from celery.bin.celery import celery as celery_cli
from django.core.management import get_commands, load_command_class
from django.utils.module_loading import import_string
from docker.utils.build import PatternMatcher
from dockerfile_parse import DockerfileParser

import console.celery
from sandboxes.runtimes import EXECUTORS
from tests.deploy.manifests import ROOT

DOCKER = ROOT / "deploy" / "docker"
IMAGES = ("web", "worker", "trainer", "sandbox-python", "sandbox-node")
UID = 10001  # deploy/kubernetes runs every Crucible pod as this user


def stages(name: str) -> list[list[dict]]:
    """The Dockerfile's instructions, one list per stage (a FROM starts one)."""
    parser = DockerfileParser(path=str(DOCKER / f"{name}.Dockerfile"))
    out: list[list[dict]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def global_args(name: str) -> dict[str, str]:
    """``ARG NAME=default`` before the first FROM (what FROM lines may use)."""
    parser = DockerfileParser(path=str(DOCKER / f"{name}.Dockerfile"))
    args = {}
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            break
        if instruction["instruction"] == "ARG" and "=" in instruction["value"]:
            key, _, value = instruction["value"].partition("=")
            args[key.strip()] = value.strip()
    return args


def ignore_matcher(name: str) -> PatternMatcher:
    path = DOCKER / f"{name}.Dockerfile.dockerignore"
    lines = [line.strip() for line in path.read_text().splitlines()]
    return PatternMatcher([line for line in lines if line and not line.startswith("#")])


def copy_sources(instruction: dict) -> list[str] | None:
    """The build-context sources of a COPY/ADD; None when it copies from a stage or image."""
    words = shlex.split(instruction["value"])
    if any(w.startswith("--from") for w in words):
        return None
    words = [w for w in words if not w.startswith("--")]
    return words[:-1]


@pytest.mark.parametrize("name", IMAGES)
def test_final_stage_runs_as_the_numeric_non_root_user(name):
    final = stages(name)[-1]
    users = [i["value"].strip() for i in final if i["instruction"] == "USER"]
    assert users, f"{name}: the final stage sets no USER (it would run as root)"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) == UID, (
        f"{name}: USER {users[-1]} is not the numeric uid {UID}"
    )
    assert gid.isdigit() and int(gid) != 0
    # the user exists in the image with that uid (tools that look it up find a name and home)
    run = " ".join(i["value"] for i in final if i["instruction"] == "RUN")
    assert f"--uid {UID}" in run and f"--gid {gid}" in run


@pytest.mark.parametrize("name", IMAGES)
def test_every_copied_source_exists_and_survives_the_dockerignore(name):
    matcher = ignore_matcher(name)
    copied = 0
    for stage in stages(name):
        for instruction in stage:
            if instruction["instruction"] not in ("COPY", "ADD"):
                continue
            sources = copy_sources(instruction)
            for source in sources or []:
                path = ROOT / source
                assert path.exists(), (
                    f"{name}.Dockerfile line {instruction['startline'] + 1}: {source} is not in "
                    "the repository"
                )
                files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
                kept = [f for f in files if not matcher.matches(f.relative_to(ROOT).as_posix())]
                assert kept, (
                    f"{name}.Dockerfile: {source} is left out of the build context by its "
                    ".dockerignore"
                )
                copied += 1
    assert copied >= 5
    # and what must never reach a builder does not
    for secret_place in (
        ".venv/bin/python",
        "var/crucible.sqlite3",
        ".git/config",
        "frontend/node_modules/x.js",
    ):
        assert matcher.matches(secret_place), f"{name}: {secret_place} would be sent to the builder"


@pytest.mark.parametrize("name", IMAGES)
def test_requirements_come_from_the_pinned_files(name):
    sources = [
        s
        for stage in stages(name)
        for i in stage
        if i["instruction"] == "COPY"
        for s in copy_sources(i) or []
    ]
    assert "requirements.txt" in sources
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith(("#", "-")):
            assert "==" in line, f"requirements.txt: {line!r} is not pinned"


@pytest.mark.parametrize("name", IMAGES)
def test_base_images_are_pinned_by_tag(name):
    args = global_args(name)
    for stage in stages(name):
        image = stage[0]["value"].split()[0]
        if image.startswith("$"):  # ${ARG} or $ARG
            image = args[image.strip("${}")]
        elif "/" not in image and ":" not in image:
            continue  # an earlier stage's name (FROM uv, ...)
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest" and "/" not in tag, (
            f"{name}: base {image} is not pinned"
        )


def _cmd(name: str) -> list[str]:
    (cmd,) = [i["value"] for i in stages(name)[-1] if i["instruction"] == "CMD"]
    return json.loads(cmd)  # exec form: no shell between the signal and the process


@pytest.mark.parametrize("name", IMAGES)
def test_cmd_runs_something_real(name):
    command = _cmd(name)
    if command[:2] == ["python", "manage.py"]:
        subcommand, *args = command[2:]
        commands = get_commands()
        assert subcommand in commands, f"{name}: no management command {subcommand!r}"
        parsed = load_command_class(commands[subcommand], subcommand).create_parser(
            "manage.py", subcommand
        )
        if args == [
            "--help"
        ]:  # the trainer image: the backend gives the real command (run_trainer RUN_ID)
            with pytest.raises(SystemExit) as exited:
                parsed.parse_args(args)
            assert exited.value.code == 0 and name == "trainer"
            return
        options = parsed.parse_args(args)
        if subcommand == "sandbox_worker":
            assert name == f"sandbox-{options.runtime}" and options.runtime in EXECUTORS
    elif command[0] == "daphne":
        application = import_string(command[-1].replace(":", "."))
        assert callable(application) and command[command.index("-p") + 1] == "8000"
    elif command[0] == "celery":
        assert command[1:3] == ["-A", "console"] and console.celery.app.main == "crucible"
        obj = CLIContext(app=console.celery.app, no_color=True, workdir=None, quiet=True)
        celery_cli.commands[command[3]].make_context(command[3], command[4:], obj=obj)
    else:
        pytest.fail(f"{name}: unexpected CMD {command}")


def test_every_dockerfile_has_its_own_dockerignore():
    for path in DOCKER.glob("*.Dockerfile"):
        assert Path(f"{path}.dockerignore").is_file(), path.name
    assert sorted(
        p.name.removesuffix(".Dockerfile") for p in DOCKER.glob("*.Dockerfile")
    ) == sorted(IMAGES)
