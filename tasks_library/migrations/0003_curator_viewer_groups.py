"""Groups ``curators`` (add/change/view on the task library) and ``viewers`` (view only).

Permissions are normally created after all migrations run (post_migrate); on a fresh
database they do not exist yet here, so this migration creates the ones it grants.
"""

from django.db import migrations

MODELS = {
    "environmentversion": "environment version",
    "testsuiteversion": "test suite version",
    "task": "task",
    "taskversion": "task version",
    "taskset": "task set",
    "tasksetversion": "task set version",
    "tasksetmember": "task set member",
}
CURATOR_ACTIONS = ("add", "change", "view")
VIEWER_ACTIONS = ("view",)


def _permissions(apps, actions):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    found = []
    for model, verbose in MODELS.items():
        content_type, _ = ContentType.objects.get_or_create(app_label="tasks_library", model=model)
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
    curators, _ = Group.objects.get_or_create(name="curators")
    curators.permissions.add(*_permissions(apps, CURATOR_ACTIONS))
    viewers, _ = Group.objects.get_or_create(name="viewers")
    viewers.permissions.add(*_permissions(apps, VIEWER_ACTIONS))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["curators", "viewers"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_library", "0002_versioning_and_curation"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
