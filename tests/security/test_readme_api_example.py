"""The README's API example (launch a run with an API key and wait for it) is valid Python, as
ruff formats it, and calls only operations the API's schema has, with the key scheme the API
accepts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

ROOT = Path(__file__).resolve().parents[2]


def example() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("From a notebook, with an operator's key")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    return "\n".join(line.removeprefix("  ") for line in block.splitlines()).rstrip() + "\n"


def test_the_example_parses_and_is_formatted():
    code = example()
    compile(code, "README example", "exec")
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run(
        [str(ruff), "format", "--diff", "--line-length", "100", "-"],
        input=code,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_example_calls_documented_operations_with_a_bearer_key():
    code = example()
    assert 'headers["Authorization"] = f"Bearer {' in code and "auth = (" not in code
    paths = set(SchemaGenerator().get_schema(request=None, public=True)["paths"])
    called = re.findall(r'api\.(get|post|patch)\(\s*f"\{base\}(/[^"]*)"', code)
    assert {"post", "get"} <= {method for method, _ in called}
    for _, path in called:
        template = "/api" + re.sub(r"\{run\['id'\]\}", "{run_id}", path)
        assert template in paths, (template, sorted(paths))
