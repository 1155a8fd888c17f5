"""The review models move to their own app (``console.review``, label ``review``).

Only Django's record of the models changes: the tables stay (``review`` 0001 takes them over
under the same names), so no row moves and nothing is copied.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0002_roles"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="reviewassignment",
                    name="assigned_by",
                ),
                migrations.RemoveField(
                    model_name="reviewassignment",
                    name="item",
                ),
                migrations.RemoveField(
                    model_name="reviewassignment",
                    name="reviewer",
                ),
                migrations.RemoveField(
                    model_name="reviewitem",
                    name="queue",
                ),
                migrations.RemoveField(
                    model_name="reviewitem",
                    name="trajectory",
                ),
                migrations.RemoveField(
                    model_name="reviewlabel",
                    name="item",
                ),
                migrations.RemoveField(
                    model_name="reviewlabel",
                    name="reviewer",
                ),
                migrations.RemoveField(
                    model_name="reviewlabel",
                    name="trajectory",
                ),
                migrations.RemoveField(
                    model_name="reviewqueue",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="reviewqueue",
                    name="run",
                ),
                migrations.RemoveField(
                    model_name="taskdraft",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="taskdraft",
                    name="from_trajectory",
                ),
                migrations.RemoveField(
                    model_name="taskdraft",
                    name="submitted_by",
                ),
                migrations.RemoveField(
                    model_name="taskdraft",
                    name="task_version",
                ),
                migrations.DeleteModel(
                    name="HackExample",
                ),
                migrations.DeleteModel(
                    name="ReviewAssignment",
                ),
                migrations.DeleteModel(
                    name="ReviewItem",
                ),
                migrations.DeleteModel(
                    name="ReviewLabel",
                ),
                migrations.DeleteModel(
                    name="ReviewQueue",
                ),
                migrations.DeleteModel(
                    name="TaskDraft",
                ),
            ],
            database_operations=[],
        ),
    ]
