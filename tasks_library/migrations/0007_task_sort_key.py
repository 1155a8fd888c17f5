"""Tasks get ``sort_key`` (:func:`tasks_library.models.natural_key` of the id), filled in for the
tasks that exist, so lists sort ``HumanEval/2`` before ``HumanEval/10``."""

import re

from django.db import migrations, models

DIGITS = re.compile(r"\d+")


def natural_key(task_id: str) -> str:
    # A copy of tasks_library.models.natural_key as of this migration (migrations keep their own).
    def number(match):
        digits = match.group().lstrip("0") or "0"
        return f"{len(digits):02d}{digits}"

    return DIGITS.sub(number, task_id.casefold())


def fill(apps, schema_editor):
    Task = apps.get_model("tasks_library", "Task")
    tasks = list(Task.objects.only("pk", "task_id"))
    for task in tasks:
        task.sort_key = natural_key(task.task_id)
    Task.objects.bulk_update(tasks, ["sort_key"], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_library", "0006_testsuiteversion_setup_code"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="sort_key",
            field=models.CharField(db_index=True, default="", editable=False, max_length=400),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
