"""The README's command table names every scenario ``up --scenario`` takes, and says what each
non-default one does (it once left out ``agent``)."""

import re
from pathlib import Path

from console.management.commands.up import Command

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_scenario_is_in_the_command_table():
    parser = Command().create_parser("manage.py", "up")
    (action,) = [a for a in parser._actions if "--scenario" in a.option_strings]
    row = next(
        line for line in README.read_text().splitlines() if line.startswith("| `up [--headless]")
    )
    listed = re.search(r"--scenario ([a-z|\\]+)\]", row).group(1).replace("\\", "").split("|")
    assert listed == list(action.choices)
    for scenario in action.choices:
        if scenario != action.default:
            assert f"`--scenario {scenario}`" in row, scenario
