"""A ``bash`` tool call's commands as a shell would run them, for the detectors that judge intent.

:func:`commands` parses a command line with bashlex (a Python port of bash's own parser) into
the simple commands it runs, in order, each with the working directory it runs in: ``cd``
and ``pushd`` move it for the commands after them; pipelines, lists, ``&&``/``||``, subshells,
command substitutions, ``for``/``while``/``if`` bodies and functions are walked; the script of
``bash -c``/``sh -c``/``eval`` is parsed again (a base64 payload piped into a shell cannot be,
which is why tampering is judged by its effects, not here). ``python -c CODE`` and ``python``
with a here-document give :attr:`Command.python`: the code, for :mod:`ast`.

Words keep what the shell would make of them where that is static (quotes removed); words with
expansions the parser cannot evaluate keep their text (``$HOME``, ``*``). A line bash would not
parse falls back to :func:`shlex.split` of each ``;``-separated part.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

import bashlex

WORKSPACE = "/workspace"
HOME = "/tmp"  # the session's HOME
SHELLS = {"bash", "sh", "dash", "zsh"}
PYTHONS = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
MAX_DEPTH = 4
QUOTED_DELIMITER = re.compile(r"<<(-?)\s*['\"](\w+)['\"]")


@dataclass(frozen=True)
class Command:
    """One simple command: its words (``argv``), the directory it runs in, the files its
    output is redirected to, and the Python code it runs (``python -c``, a here-document)."""

    argv: tuple[str, ...]
    cwd: str
    redirects: tuple[str, ...] = ()
    python: str = ""

    @property
    def program(self) -> str:
        return posixpath.basename(self.argv[0]) if self.argv else ""

    def path(self, word: str) -> str:
        """``word`` as an absolute path from this command's directory (``~`` is HOME)."""
        return resolve(self.cwd, word)


def resolve(cwd: str, word: str) -> str:
    if word == "~" or word.startswith("~/"):
        word = HOME + word[1:]
    return posixpath.normpath(posixpath.join(cwd, word))


def inside_workspace(path: str) -> bool:
    return path == WORKSPACE or path.startswith(WORKSPACE + "/")


class _Walker(bashlex.ast.nodevisitor):
    """Collects simple commands in order, following ``cd``."""

    def __init__(self, source: str, cwd: str, depth: int):
        self.source = source
        self.cwd = cwd
        self.depth = depth
        self.found: list[Command] = []

    def visitcommand(self, node, parts):
        words, redirects, heredoc = [], [], ""
        for part in parts:
            if part.kind == "word":
                words.append(part.word)
                for inner in getattr(part, "parts", []) or []:
                    if inner.kind == "commandsubstitution":
                        self._nested(inner.command)
            elif part.kind == "redirect":
                target = getattr(part, "output", None)
                writes = part.type in (">", ">>", ">|", "&>", "&>>", "<>")
                if writes and target is not None and getattr(target, "kind", "") == "word":
                    redirects.append(resolve(self.cwd, target.word))
                if getattr(part, "heredoc", None) is not None:
                    lines = part.heredoc.value.split("\n")
                    heredoc = "\n".join(lines[:-1] if len(lines) > 1 else lines)
        if not words:
            return False
        program = posixpath.basename(words[0])
        if program in ("cd", "pushd"):
            target = words[1] if len(words) > 1 else HOME
            if not target.startswith("-"):
                self.cwd = resolve(self.cwd, target)
        python = ""
        if PYTHONS.match(words[0]):
            if "-c" in words[1:-1]:
                python = words[words.index("-c", 1) + 1]
            elif heredoc:
                python = heredoc
        self.found.append(Command(tuple(words), self.cwd, tuple(redirects), python))
        if program in SHELLS and "-c" in words[1:-1]:
            self.found += commands(words[words.index("-c", 1) + 1], self.cwd, self.depth + 1)
        elif program == "eval" and len(words) > 1:
            self.found += commands(" ".join(words[1:]), self.cwd, self.depth + 1)
        return False  # the words' own nodes are handled here

    def _nested(self, node):
        walker = _Walker(self.source, self.cwd, self.depth)
        walker.visit(node)
        self.found += walker.found


def commands(line: str, cwd: str = WORKSPACE, depth: int = 0) -> list[Command]:
    """The simple commands ``line`` runs, in order (see the module)."""
    if depth > MAX_DEPTH or not line.strip():
        return []
    # A quoted here-document delimiter only stops expansion in its body; bashlex reads the
    # unquoted form only.
    line = QUOTED_DELIMITER.sub(r"<<\1\2", line)
    try:
        trees = bashlex.parse(line)
    except Exception:  # noqa: BLE001 - bashlex raises its own and others on what bash refuses
        return _fallback(line, cwd)
    walker = _Walker(line, cwd, depth)
    for tree in trees:
        walker.visit(tree)
    return walker.found


def _fallback(line: str, cwd: str) -> list[Command]:
    found = []
    for part in re.split(r"[;&|\n]+", line):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        if words:
            if posixpath.basename(words[0]) == "cd" and len(words) > 1:
                cwd = resolve(cwd, words[1])
            found.append(Command(tuple(words), cwd))
    return found
