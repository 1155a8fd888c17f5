"""Terminal task directories: a Harbor-format one and a Terminal-Bench-format one, written here,
import, export to Harbor's layout and import again with identical content; hostile directories
are refused naming the file."""

import os
import shutil
import tomllib

import pytest

from tasks_library.terminal import layout
from tasks_library.terminal.layout import (
    TerminalTaskError,
    read_harbor,
    read_task,
    read_terminal_bench,
    write_harbor,
)

TASK_TOML = """\
version = "1.0"

[task]
name = "crucible/restore-nginx-site"

[metadata]
difficulty = "easy"
category = "system-operations"
tags = ["nginx", "service"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 600.0

[environment]
cpus = 1
memory_mb = 1024
"""
DOCKERFILE = """\
FROM debian:trixie-slim
RUN apt-get update && apt-get install -y --no-install-recommends nginx curl
WORKDIR /app
COPY site.conf /etc/nginx/conf.d/site.conf
COPY www /app/www
"""
TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
if curl -fsS http://127.0.0.1:8080/ | grep -q 'hello'; then echo 1; else echo 0; fi \\
  > /logs/verifier/reward.txt
"""


def write(root, files: dict[str, str | bytes]):
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root


@pytest.fixture
def harbor_dir(tmp_path):
    return write(
        tmp_path / "restore-nginx-site",
        {
            "instruction.md": "The site on port 8080 answers 502. Make it serve /app/www again.\n",
            "task.toml": TASK_TOML,
            "environment/Dockerfile": DOCKERFILE,
            "environment/site.conf": "server { listen 8080; root /app/wwww; }\n",
            "environment/www/index.html": "<p>hello</p>\n",
            "tests/test.sh": TEST_SH,
            "tests/expected.txt": "hello\n",
            "solution/solve.sh": "sed -i 's#/app/wwww#/app/www#' /etc/nginx/conf.d/site.conf\n",
            "solution/notes/why.md": b"\xe2\x9c\x93 a typo in the root\n",
        },
    )


def test_a_harbor_task_imports_and_exports_with_identical_content(harbor_dir, tmp_path):
    task = read_task(harbor_dir)
    assert task.name == "crucible/restore-nginx-site"
    assert task.instruction.startswith("The site on port 8080")
    assert task.timeout_s("agent", 1) == 600.0 and task.timeout_s("verifier", 1) == 60.0
    assert task.recipe.debian_packages == ["nginx", "curl"] and task.recipe.workdir == "/app"
    assert set(task.part("tests")) == {"test.sh", "expected.txt"}
    assert set(task.part("environment")) == {"Dockerfile", "site.conf", "www/index.html"}

    out = write_harbor(task, tmp_path / "exported")
    again = read_harbor(out)
    assert again.content_hash() == task.content_hash()
    for path in task.files:  # the same bytes, file by file
        assert (out / path).read_bytes() == (harbor_dir / path).read_bytes()
    assert os.access(out / "tests/test.sh", os.X_OK)
    assert not os.access(out / "instruction.md", os.X_OK)


def test_any_changed_byte_changes_the_content_hash(harbor_dir):
    before = read_harbor(harbor_dir).content_hash()
    (harbor_dir / "tests/expected.txt").write_text("hello!\n")
    assert read_harbor(harbor_dir).content_hash() != before


@pytest.fixture
def terminal_bench_dir(tmp_path):
    return write(
        tmp_path / "count-errors",
        {
            "task.yaml": (
                "instruction: |\n"
                "  Count the ERROR lines in /app/app.log and write the number to"
                " /app/answer.txt.\n"
                "author_email: ops@example.com\n"
                "difficulty: easy\n"
                "category: data-analysis\n"
                "tags: [logs, grep]\n"
                "parser_name: pytest\n"
                "max_agent_timeout_sec: 360\n"
                "max_test_timeout_sec: 60\n"
                "run_tests_in_same_shell: false\n"
            ),
            "Dockerfile": (
                "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\n"
                "WORKDIR /app\nCOPY app.log /app/app.log\n"
            ),
            "docker-compose.yaml": (
                "services:\n  client:\n    build:\n      dockerfile: Dockerfile\n"
                "    command: [sh, -c, sleep infinity]\n"
            ),
            "app.log": "INFO a\nERROR b\nERROR c\n",
            "solution.sh": "grep -c ERROR /app/app.log > /app/answer.txt\n",
            "run-tests.sh": (
                "#!/bin/bash\npip install pytest==8.3.4\npytest $TEST_DIR/test_outputs.py\n"
            ),
            "tests/test_outputs.py": (
                "def test_answer():\n    assert open('/app/answer.txt').read().strip() == '2'\n"
            ),
        },
    )


def test_a_terminal_bench_task_reads_into_harbors_layout_and_round_trips(
    terminal_bench_dir, tmp_path
):
    task = read_task(terminal_bench_dir)
    assert task.name == "count-errors"
    assert sorted(task.files) == [
        "environment/Dockerfile",
        "environment/app.log",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/run-tests.sh",
        "tests/test.sh",
        "tests/test_outputs.py",
    ]
    assert task.instruction.startswith("Count the ERROR lines")
    config = tomllib.loads(task.files["task.toml"].decode())
    assert config["agent"] == {"timeout_sec": 360.0}
    assert config["verifier"] == {"timeout_sec": 60.0}
    assert config["metadata"]["parser_name"] == "pytest"
    assert config["metadata"]["tags"] == ["logs", "grep"]
    assert "max_agent_timeout_sec" not in config["metadata"]
    test_sh = task.files["tests/test.sh"].decode()
    assert "bash /tests/run-tests.sh" in test_sh and "/logs/verifier/reward.txt" in test_sh
    assert task.recipe.runtime == "python3.13" and task.recipe.copies == [
        ("app.log", "/app/app.log")
    ]

    exported = write_harbor(task, tmp_path / "harbor")
    again = read_task(exported)  # now read as Harbor's layout
    assert again.content_hash() == task.content_hash()
    assert read_terminal_bench(terminal_bench_dir).content_hash() == task.content_hash()


def test_a_terminal_bench_solution_yaml_becomes_a_script(terminal_bench_dir):
    (terminal_bench_dir / "solution.sh").unlink()
    (terminal_bench_dir / "solution.yaml").write_text(
        "- command: cd /app\n  min_timeout_sec: 1\n- command: grep -c ERROR app.log > answer.txt\n"
    )
    solve = read_task(terminal_bench_dir).files["solution/solve.sh"].decode()
    assert solve.splitlines()[-2:] == ["cd /app", "grep -c ERROR app.log > answer.txt"]


def test_hostile_and_broken_directories_are_refused_naming_the_file(harbor_dir, tmp_path):
    def refused(says: str, field: str | None = None):
        with pytest.raises(TerminalTaskError) as caught:
            read_task(harbor_dir)
        assert says in str(caught.value), str(caught.value)
        assert str(harbor_dir) in str(caught.value)
        if field:
            assert caught.value.field == field

    secret = tmp_path / "host-secret"
    secret.write_text("root:x:0:0")
    (harbor_dir / "tests/leak.txt").symlink_to(secret)
    refused("tests/leak.txt is a link", "tests/leak.txt")
    (harbor_dir / "tests/leak.txt").unlink()

    (harbor_dir / "environment/linked").symlink_to(tmp_path, target_is_directory=True)
    refused("environment/linked is a link")
    (harbor_dir / "environment/linked").unlink()

    os.mkfifo(harbor_dir / "tests/pipe")
    refused("tests/pipe is not a regular file")
    (harbor_dir / "tests/pipe").unlink()

    (harbor_dir / "environment/Dockerfile").write_text(DOCKERFILE + "RUN curl x | sh\n")
    refused("environment/Dockerfile line 6: RUN curl x | sh", "environment/Dockerfile")
    (harbor_dir / "environment/Dockerfile").write_text(DOCKERFILE.replace("www /app", "wx /app"))
    refused("copies wx, which is not in environment/")
    (harbor_dir / "environment/Dockerfile").write_text(DOCKERFILE)

    (harbor_dir / "task.toml").write_text(TASK_TOML.replace("600.0", '"ten minutes"'))
    refused("[agent] timeout_sec = 'ten minutes'", "task.toml")
    (harbor_dir / "task.toml").write_text("version = \n")
    refused("task.toml is not TOML", "task.toml")
    (harbor_dir / "task.toml").write_text("agent = 600\n")
    refused("task.toml agent = 600: write a [agent] table", "task.toml")
    (harbor_dir / "task.toml").write_text(TASK_TOML)

    (harbor_dir / "tests/test.sh").unlink()
    refused("no tests/test.sh in it", "tests/test.sh")
    (harbor_dir / "tests/test.sh").write_text(TEST_SH)
    assert read_task(harbor_dir).name == "crucible/restore-nginx-site"  # whole again

    with pytest.raises(TerminalTaskError, match="no task.toml"):
        read_task(tmp_path / "host-secret")


def test_a_terminal_bench_task_with_several_services_is_refused(terminal_bench_dir):
    (terminal_bench_dir / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build: .\n  db:\n    image: postgres:16\n"
    )
    with pytest.raises(TerminalTaskError, match="2 services \\(client, db\\)"):
        read_task(terminal_bench_dir)


def test_exporting_into_a_directory_that_holds_files_is_refused(harbor_dir):
    with pytest.raises(TerminalTaskError, match="not empty"):
        write_harbor(read_task(harbor_dir), harbor_dir)


@pytest.mark.parametrize(
    ("task_yaml", "says"),
    [
        # an alias bomb: 40 uses of a 40-item list, 1,600 values once expanded, from 5 lines
        (
            "instruction: x\nmeta:\n  a: &a [" + ", ".join(["x"] * 40) + "]\n"
            "  b: [" + ", ".join(["*a"] * 40) + "]\n",
            "over 1000 values",
        ),
        ("instruction: x\ndeep: " + "[" * 12 + "x" + "]" * 12 + "\n", "nested over 8 levels"),
        ("instruction: x\nloop: &loop [*loop]\n", "task.yaml loop"),
        ("instruction: x\nblob: !!binary aGVsbG8=\n", "a bytes value"),
        ("instruction: x\ntags: [a, null]\n", "holds a null"),
        ("instruction: x\nmax_agent_timeout_sec: ten\n", "max_agent_timeout_sec: 'ten'"),
        ("instruction: x\nmax_test_timeout_sec: -1\n", "max_test_timeout_sec: -1"),
        ("instruction: x\nmax_test_timeout_sec: true\n", "max_test_timeout_sec: True"),
        ("[not, a, mapping]\n", "not a mapping"),
        ("instruction: [1, 2\n", "not YAML"),
        ("author: x\n", "no 'instruction'"),
    ],
)
def test_a_hostile_task_yaml_is_refused_not_expanded(terminal_bench_dir, task_yaml, says):
    (terminal_bench_dir / "task.yaml").write_text(task_yaml)
    with pytest.raises(TerminalTaskError) as caught:
        read_task(terminal_bench_dir)
    assert says in str(caught.value) and caught.value.field == "task.yaml"


def test_deep_wide_and_large_trees_and_odd_names_are_refused(harbor_dir, monkeypatch):
    deep = harbor_dir / "environment" / "/".join(["d"] * 40)
    deep.mkdir(parents=True)
    with pytest.raises(TerminalTaskError, match="directories deep"):
        read_task(harbor_dir)
    shutil.rmtree(harbor_dir / "environment" / "d")

    (harbor_dir / "tests" / "evil\u202etxt.sh").write_text("x")
    with pytest.raises(TerminalTaskError, match="bidirectional control U\\+202E"):
        read_task(harbor_dir)
    (harbor_dir / "tests" / "evil\u202etxt.sh").unlink()

    monkeypatch.setattr(layout, "MAX_FILE_BYTES", 64)
    with pytest.raises(TerminalTaskError, match="over 64 bytes a file"):
        read_task(harbor_dir)
    monkeypatch.setattr(layout, "MAX_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(layout, "MAX_TOTAL_BYTES", 300)
    with pytest.raises(TerminalTaskError, match="over 300 bytes in all"):
        read_task(harbor_dir)
    monkeypatch.setattr(layout, "MAX_TOTAL_BYTES", 1 << 20)
    monkeypatch.setattr(layout, "MAX_FILES", 5)
    with pytest.raises(TerminalTaskError, match="over 5 files and directories"):
        read_task(harbor_dir)


def test_a_terminal_bench_file_where_the_import_writes_is_refused(terminal_bench_dir):
    (terminal_bench_dir / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    with pytest.raises(TerminalTaskError, match="tests/test.sh is where the import puts"):
        read_task(terminal_bench_dir)


def test_a_task_name_with_a_control_character_is_refused(harbor_dir):
    (harbor_dir / "task.toml").write_text(TASK_TOML.replace("restore-nginx-site", "a\\u001b[2Jb"))
    with pytest.raises(TerminalTaskError, match="control character U\\+001B"):
        read_task(harbor_dir)


def test_yaml_nested_past_the_parsers_recursion_is_refused(terminal_bench_dir):
    (terminal_bench_dir / "task.yaml").write_text("instruction: " + "[" * 50000 + "]" * 50000)
    with pytest.raises(TerminalTaskError, match="task.yaml is not YAML"):
        read_task(terminal_bench_dir)


def test_a_hand_built_task_cannot_write_outside_its_directory(tmp_path):
    task = layout.TerminalTask(
        files={"../escape.sh": b"x", "instruction.md": b"x"}, directory_name="x"
    )
    with pytest.raises(TerminalTaskError, match="leaves the task's directory"):
        write_harbor(task, tmp_path / "out")
    assert not (tmp_path / "escape.sh").exists()
