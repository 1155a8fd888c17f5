"""Run a Python script with some top-level modules unimportable, as in an image that lacks them.

    python blocked_run.py MODULES_FILE SCRIPT [ARGS...]

MODULES_FILE names one module a line. An import of any of them (or of their submodules)
raises ModuleNotFoundError naming it, exactly as in an image where it is not installed.
"""

import importlib.abc
import os
import runpy
import sys


class Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (not in the sandbox image)", name=fullname
            )


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        names = [line.strip() for line in handle if line.strip()]
    sys.meta_path.insert(0, Blocker(names))
    script = sys.argv[2]
    sys.argv = sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` does
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
