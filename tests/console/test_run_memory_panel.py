"""The run page shows the run's memory report: sharding, each rank's bytes of weights, gradients,
optimizer state and peak, and bytes per parameter; a run without one shows no panel."""

import re

import pytest
import torch
from django.template.defaultfilters import filesizeformat
from django.test import Client

from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixtures)
from tests.training.conftest import one_task_run
from training import services, sharding

pytestmark = pytest.mark.django_db


def report() -> dict:
    """A real report: one rank, a two-layer MLP after one AdamW step."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 64)).sum().backward()
    optimizer.step()
    return sharding.memory_report(
        model, optimizer, torch.device("cpu"), sharding=sharding.Sharding(mode="fsdp2")
    )


def test_run_page_shows_the_memory_report(roles):
    run = one_task_run()
    client = Client()
    client.force_login(make_user("vic", "viewers"))
    assert b'id="memory"' not in client.get(f"/runs/{run.pk}/").content

    memory = report()
    assert memory["parameters"] == 64 * 64 + 64 + 64 * 8 + 8
    assert memory["bytes_per_param"]["weights"] == 4.0
    services.run_summary_update(run_id=run.pk, memory=memory)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    panel = page[page.index('id="memory"') : page.index("</section>", page.index('id="memory"'))]
    assert "sharding <b>fsdp2</b>" in panel
    assert f"{memory['parameters']} parameters" in panel
    row = re.search(r'<tr class="per-param" id="memory-per-param">(.*?)</tr>', panel, re.S)
    # AdamW: two float32 moments (8 bytes) and a step counter per parameter tensor
    assert 8.0 < memory["bytes_per_param"]["optimizer"] < 8.01
    shown = ["4.0", "4.0", str(memory["bytes_per_param"]["optimizer"]), "0.0"]
    assert re.findall(r"<td>([\d.]+)</td>", row.group(1)) == shown
    # the rank's peak resident set, in the unit its size calls for (this process's: MB or GB)
    rank = re.search(r'<tr data-rank="0">(.*?)</tr>', panel, re.S)
    assert rank and filesizeformat(memory["ranks"][0]["peak"]) in rank.group(1)
