"""The review app takes over the tables the console app made (console 0001, 0003).

The models are created in Django's state only (their tables exist, under the console's names:
each model's ``db_table``), and the content types, hence the permissions granted to the
``operators`` and ``reviewers`` groups (console 0002), move from ``console`` to ``review``.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = (
    "reviewqueue",
    "reviewitem",
    "reviewassignment",
    "reviewlabel",
    "hackexample",
    "taskdraft",
)


def content_types_move(apps, schema_editor, source="console", target="review"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label=source, model__in=MODELS).update(app_label=target)


def content_types_move_back(apps, schema_editor):
    content_types_move(apps, schema_editor, source="review", target="console")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("console", "0003_review_moves_to_its_own_app"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tasks_library", "0005_reference_profile"),
        ("training", "0004_stepmetric_timeline"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="HackExample",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("code", models.TextField()),
                        ("label", models.CharField(default="reward_hack", max_length=40)),
                        ("flags", models.JSONField(blank=True, default=list)),
                        ("note", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "task_version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="hack_examples",
                                to="tasks_library.taskversion",
                            ),
                        ),
                        (
                            "trajectory",
                            models.OneToOneField(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="hack_example",
                                to="training.trajectory",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_hackexample",
                        "ordering": ["id"],
                    },
                ),
                migrations.CreateModel(
                    name="ReviewQueue",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        (
                            "strategy",
                            models.CharField(
                                choices=[
                                    ("uniform", "uniform (seeded random)"),
                                    ("highest_reward", "highest reward first"),
                                    ("flagged_first", "flagged first (then by monitor score)"),
                                    ("monitor_score", "most suspicious first (monitor score)"),
                                    ("stratified_task", "stratified by task version (round robin)"),
                                    (
                                        "stratified_difficulty",
                                        "stratified by difficulty bucket (round robin)",
                                    ),
                                    (
                                        "verifier_disagreement",
                                        (
                                            "verifier disagreement (tasks whose labels "
                                            "contradicted the reward)"
                                        ),
                                    ),
                                ],
                                max_length=40,
                            ),
                        ),
                        ("size", models.PositiveIntegerField()),
                        ("reviewers_per_item", models.PositiveIntegerField(default=1)),
                        ("seed", models.IntegerField(default=0)),
                        ("filters", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review_queues",
                                to="training.trainingrun",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_reviewqueue",
                        "ordering": ["-id"],
                    },
                ),
                migrations.CreateModel(
                    name="ReviewItem",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("position", models.PositiveIntegerField()),
                        ("reason", models.CharField(blank=True, max_length=300)),
                        (
                            "trajectory",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review_items",
                                to="training.trajectory",
                            ),
                        ),
                        (
                            "queue",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="items",
                                to="review.reviewqueue",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_reviewitem",
                        "ordering": ["queue_id", "position"],
                    },
                ),
                migrations.CreateModel(
                    name="TaskDraft",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("task_id", models.CharField(max_length=200)),
                        ("prompt", models.TextField()),
                        ("entry_point", models.CharField(max_length=200)),
                        ("reference_solution", models.TextField()),
                        ("files", models.JSONField(blank=True, default=dict)),
                        ("tests", models.TextField()),
                        ("harness", models.CharField(default="python-check", max_length=40)),
                        (
                            "status",
                            models.CharField(
                                choices=[("draft", "draft"), ("submitted", "submitted")],
                                default="draft",
                                max_length=20,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("submitted_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "from_trajectory",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="task_drafts",
                                to="training.trajectory",
                            ),
                        ),
                        (
                            "submitted_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "task_version",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="tasks_library.taskversion",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_taskdraft",
                        "ordering": ["-id"],
                    },
                ),
                migrations.CreateModel(
                    name="ReviewAssignment",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("assigned_at", models.DateTimeField(auto_now_add=True)),
                        ("completed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "assigned_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "reviewer",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review_assignments",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "item",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="assignments",
                                to="review.reviewitem",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_reviewassignment",
                        "ordering": ["item_id", "id"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("item", "reviewer"), name="unique_review_assignment"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ReviewLabel",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "label",
                            models.CharField(
                                choices=[
                                    ("correct", "correct"),
                                    ("reward_hack", "reward hack"),
                                    ("broken_task", "broken task"),
                                    ("ambiguous_task", "ambiguous task"),
                                    ("other", "other"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("note", models.TextField(blank=True)),
                        ("feedback", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "item",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="labels",
                                to="review.reviewitem",
                            ),
                        ),
                        (
                            "reviewer",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review_labels",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "trajectory",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review_labels",
                                to="training.trajectory",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "console_reviewlabel",
                        "ordering": ["-updated_at", "-id"],
                        "indexes": [
                            models.Index(
                                fields=["trajectory", "label"],
                                name="console_rev_traject_6c652b_idx",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("item", "reviewer"), name="unique_review_label"
                            )
                        ],
                    },
                ),
                migrations.AddConstraint(
                    model_name="reviewitem",
                    constraint=models.UniqueConstraint(
                        fields=("queue", "trajectory"), name="unique_review_item_trajectory"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="reviewitem",
                    constraint=models.UniqueConstraint(
                        fields=("queue", "position"), name="unique_review_item_position"
                    ),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_move, content_types_move_back),
    ]
