"""Groups ``operators`` (launch and cancel runs, create review queues and assign their items) and
``reviewers`` (label the review items assigned to them, write task drafts).

With ``curators`` and ``viewers`` (tasks_library 0003) these are the console's roles; an admin is
a superuser. Permissions are normally created after all migrations run (post_migrate); on a fresh
database they do not exist yet here, so this migration creates the ones it grants.
"""

from django.db import migrations

# group -> [(app, model, verbose model name, actions)]
GRANTS = {
    "operators": [
        ("training", "trainingrun", "training run", ("add", "change", "view")),
        ("console", "reviewqueue", "review queue", ("add", "change", "view")),
        ("console", "reviewitem", "review item", ("view",)),
        ("console", "reviewassignment", "review assignment", ("add", "change", "view")),
        ("console", "reviewlabel", "review label", ("view",)),
    ],
    "reviewers": [
        ("console", "reviewqueue", "review queue", ("view",)),
        ("console", "reviewitem", "review item", ("view",)),
        ("console", "reviewassignment", "review assignment", ("view",)),
        ("console", "reviewlabel", "review label", ("add", "change", "view")),
        ("console", "taskdraft", "task draft", ("add", "change", "view")),
        ("console", "hackexample", "hack example", ("view",)),
    ],
}


def _permissions(apps, grants):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    found = []
    for app_label, model, verbose, actions in grants:
        content_type, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
        for action in actions:
            permission, _ = Permission.objects.get_or_create(
                content_type=content_type,
                codename=f"{action}_{model}",
                defaults={"name": f"Can {action} {verbose}"},
            )
            found.append(permission)
    return found


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name, grants in GRANTS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*_permissions(apps, grants))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(GRANTS)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0001_initial"),
        ("training", "0003_rewards_alerts_evaluation"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
