"""Import cycles between Crucible's files (`./crucible lint` runs it; README: How it fits together).

Builds the import graph of the rooms with grimp (import-linter's own graph builder): every
``import`` a file holds, at its top or inside a function, is an edge. Each strongly connected
component of more than one file is a cycle: every file in it reaches every other.

A file belongs to the package it sits in (a package's ``__init__`` to that package itself). A cycle
whose files sit in two or more packages is an error (exit 1): one package then depends on another
and back, and neither can be read, tested or moved without the other. A cycle inside one package
is printed and allowed; each one that remains is listed in :data:`KNOWN` with the reason it stays,
and a new one is printed as such (still allowed: one package is one unit).

    python .ci/import_cycles.py        # prints the cycles, exits 1 on a cycle across packages
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "console", "sandboxes", "tasks_library", "training")

KNOWN: dict[frozenset[str], str] = {
    frozenset({"training.reconcile", "training.tasks"}): (
        "Celery's own shape: the reconcile pass, which the beat task runs_reconcile_task runs, "
        "queues run_launch again for a lost or resumed run; sending it by name instead would "
        "skip eager mode in the tests and the task's routing"
    ),
    frozenset({"tasks_library.repositories", "tasks_library.services"}): (
        "a repository task is one more family of the library's write services: tasks_import "
        "and task_version_edit hand a repository record or version to repositories, which "
        "builds on the services' checks and get-or-create steps"
    ),
}
"""The cycles that remain inside one package, each with why it stays."""


def package_of(graph: grimp.ImportGraph, module: str) -> str:
    """The package a module's file sits in: a package's ``__init__`` is its own package."""
    if graph.find_children(module):
        return module
    return module.rpartition(".")[0] or module


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    imported = graph.find_modules_directly_imported_by(child)
                    work.append((child, iter(sorted(imported))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    failed = False
    found = cycles(graph)
    for component in found:
        packages = sorted({package_of(graph, module) for module in component})
        if len(packages) > 1:
            failed = True
            print(f"import cycle across packages {', '.join(packages)} ({len(component)} files):")
        else:
            reason = KNOWN.get(frozenset(component), "new: say why it stays in KNOWN")
            print(f"import cycle inside {packages[0]} ({len(component)} files; {reason}):")
        for module in component:
            imported = sorted(graph.find_modules_directly_imported_by(module) & set(component))
            print(f"  {module} -> {', '.join(imported)}")
    if not found:
        print("no import cycle")
    if failed:
        print("import cycles across packages: break each (see the docstring)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
