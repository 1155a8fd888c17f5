"""The Dockerfile subset a terminal task's environment is read from: what maps onto a Crucible
environment is read into a recipe, anything else is refused naming its line."""

import pytest

from tasks_library.terminal.dockerfile import DockerfileError, parse

NGINX = """\
# a misconfigured site to repair
FROM debian:trixie-slim
ENV LANG=C.UTF-8 PAGER="less -R"
RUN apt-get update && \\
    apt-get install -y --no-install-recommends nginx=1.26.3-3 curl \\
    && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir pytest==8.3.4 requests==2.32.3
WORKDIR /app
COPY site.conf /etc/nginx/conf.d/
COPY www ./www
RUN mkdir -p logs /var/run/app
ENV APP_MODE production
"""


def test_the_subset_reads_into_a_recipe():
    recipe = parse(NGINX)
    assert recipe.base == "debian:trixie-slim" and recipe.runtime == "python3.13"
    assert recipe.debian_packages == ["nginx=1.26.3-3", "curl"]
    assert recipe.python_packages == ["pytest==8.3.4", "requests==2.32.3"]
    assert recipe.copies == [("site.conf", "/etc/nginx/conf.d/"), ("www", "/app/www")]
    assert recipe.directories == ["/app/logs", "/var/run/app"]
    assert recipe.workdir == "/app"
    assert recipe.env == {"LANG": "C.UTF-8", "PAGER": "less -R", "APP_MODE": "production"}
    assert recipe.as_dict()["copies"] == [["site.conf", "/etc/nginx/conf.d/"], ["www", "/app/www"]]


@pytest.mark.parametrize(
    ("image", "runtime"),
    [
        ("python:3.11-slim", "python3.11"),
        ("python:3.13", "python3.13"),
        ("docker.io/library/python:3.12-slim-bookworm", "python3.12"),
        ("ubuntu:24.04", "python3.13"),
        ("debian", "python3.13"),
        ("debian:trixie AS base", "python3.13"),
        ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "python3.13"),
        ("ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest", "python3.13"),
    ],
)
def test_debian_ubuntu_and_python_bases_map_to_a_runtime(image, runtime):
    assert parse(f"FROM {image}\n").runtime == runtime


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("", 0, "needs a FROM"),
        ("WORKDIR /app\nFROM debian\n", 1, "before FROM"),
        ("FROM alpine:3.20\n", 1, "Debian, Ubuntu or python"),
        ("FROM node:22\n", 1, "Debian, Ubuntu or python"),
        ("FROM debian\nFROM python:3.13\n", 2, "second FROM"),
        ("FROM debian extra words\n", 1, "write FROM IMAGE"),
        ("FROM debian\n\nRUN curl -sL https://x.sh | bash\n", 3, "only apt-get install"),
        ("FROM debian\nRUN apt-get update && make install\n", 2, "make install"),
        ("FROM debian\nRUN echo hi > /etc/motd\n", 2, "only apt-get install"),
        ("FROM debian\nRUN pip install pandas\n", 2, "not pinned"),
        ("FROM debian\nRUN pip install pandas>=2\n", 2, "not pinned"),
        ("FROM debian\nRUN pip install -r requirements.txt\n", 2, "not pinned"),
        ("FROM debian\nRUN apt-get install -y 'nginx; rm -rf /'\n", 2, "Debian package"),
        ('FROM debian\nRUN ["apt-get", "update"]\n', 2, "exec form"),
        ('FROM debian\nCMD ["nginx", "-g", "daemon off;"]\n', 2, "CMD is outside"),
        ("FROM debian\nUSER nobody\n", 2, "USER is outside"),
        ("FROM debian\nADD https://example.com/x.tgz /x\n", 2, "ADD is outside"),
        ("FROM debian\nARG V=1\n", 2, "ARG is outside"),
        ("FROM debian\nCOPY --from=build /x /x\n", 2, "without flags"),
        ("FROM debian\nCOPY --chown=1000 a /a\n", 2, "without flags"),
        ("FROM debian\nCOPY *.py /app/\n", 2, "inside the build context"),
        ("FROM debian\nCOPY ../secret /app/\n", 2, "inside the build context"),
        ("FROM debian\nCOPY a b /app\n", 2, "must end in /"),
        ("FROM debian\nWORKDIR $HOME\n", 2, "literal path"),
        ("FROM debian\nENV 1BAD=x\n", 2, "NAME=VALUE"),
    ],
)
def test_what_falls_outside_is_refused_naming_its_line(text, line, says):
    with pytest.raises(DockerfileError) as caught:
        parse(text)
    assert caught.value.line == line
    assert says in str(caught.value)
    if line:
        assert str(caught.value).startswith(f"Dockerfile line {line}: ")


def test_a_continued_instruction_is_named_by_its_first_line():
    text = "FROM debian\n# setup\nRUN apt-get update && \\\n  # a comment inside\n  wget x\n"
    with pytest.raises(DockerfileError) as caught:
        parse(text)
    assert caught.value.line == 3 and "wget x" in str(caught.value)
