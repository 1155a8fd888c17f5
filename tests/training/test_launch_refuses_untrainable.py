"""A launch is refused before anything is created when the run could train nothing: every task's
prompt is longer than max_prompt_tokens (counted with a bound that holds for the default policy's
tokenizer, trained only when the run starts, and exactly for a checkpoint's), or repository tasks
outside agent mode; through the service, the launch form and the API, the error naming the key."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tasks_library.models import TaskVersion
from tests.console.test_run_launch_form import launched, one_task_set  # noqa: F401 (fixture)
from tests.review.review_seed import make_roles
from tests.tasks_library.conftest import eager_celery, make_user, roles  # noqa: F401 (fixtures)
from training import services
from training.config import ConfigError, RunConfig
from training.launch_checks import tokens_at_least
from training.models import TrainingRun
from training.policy import train_tokenizer

PROMPT = "def add(a, b):\n    " + '"""Add two numbers: a plus b, then return the sum."""\n' * 8


def long_task_set(name: str):
    task_set = one_task_set(name)
    TaskVersion.objects.filter(task__task_id__startswith="Launch/").update(prompt=PROMPT)
    return task_set


def test_the_bound_never_exceeds_the_default_tokenizer(humaneval):
    corpus = [r["prompt"] + r["canonical_solution"] for r in humaneval[:40]]
    tokenizer = train_tokenizer(corpus)
    texts = [r["prompt"] for r in humaneval[:40]] + [
        "print('<|im_end|>') <|bos|> x<|end|>y",
        "unicode: ça, 東京, 🙂 and tabs\t\tend",
    ]
    for text in texts:
        actual = len(tokenizer.encode(text, add_special_tokens=False).ids)
        assert 0 < tokens_at_least(text) <= actual, text
    # and it is not a weak bound: the pieces of code are most of its tokens
    assert tokens_at_least(humaneval[0]["prompt"]) > 0.5 * len(
        tokenizer.encode(humaneval[0]["prompt"], add_special_tokens=False).ids
    )


@pytest.mark.django_db
def test_the_service_refuses_and_creates_nothing():
    task_set = long_task_set("long")
    with pytest.raises(ConfigError, match="every task's prompt is longer than 40 tokens") as no:
        services.run_create(
            task_set=task_set, config=RunConfig.from_dict({"max_prompt_tokens": 40})
        )
    assert no.value.field == "max_prompt_tokens" and "at least" in str(no.value)
    assert not TrainingRun.objects.exists()
    assert services.run_create(task_set=task_set, config=RunConfig.from_dict({}))


@pytest.mark.django_db
def test_the_form_and_the_api_refuse_it_naming_the_key(roles, eager_celery, launched):
    task_set = long_task_set("long")
    make_roles()
    web = Client()
    web.force_login(make_user("cora", "curators"))
    form = web.post(
        "/runs/new/",
        {"task_set": task_set.pk, "steps": 3, "backend": "local", "config": "max_prompt_tokens=40"},
    )
    assert form.status_code == 400 and b"would train on nothing" in form.content
    api = APIClient()
    api.force_authenticate(make_user("otto", "operators"))
    answer = api.post(
        "/api/runs/",
        {"task_set": "long", "steps": 3, "config": {"max_prompt_tokens": 40}},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["field"] == "config"  # the API's input that holds the key
    assert "would train on nothing" in answer.json()["error"]
    assert not TrainingRun.objects.exists() and launched == []
