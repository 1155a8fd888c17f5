"""Who may do what in the task library.

Two groups, created by migration ``0003_curator_viewer_groups``:

* ``curators`` hold the add/change/view permissions of the task library's models and
  may edit tasks (new versions), validate, quarantine, approve and pin task sets;
* ``viewers`` hold the view permissions. Any signed-in user may read.

Superusers hold every permission, so they may do everything.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

CURATORS = "curators"
VIEWERS = "viewers"

# What a curator does writes task versions and task sets: both are needed.
CURATE_PERMISSIONS = ("tasks_library.add_taskversion", "tasks_library.change_taskversion",
                      "tasks_library.add_taskset", "tasks_library.change_taskset")


def is_curator(user) -> bool:
    """True when ``user`` may change the task library (a curator or a superuser)."""
    return bool(user and user.is_authenticated and user.has_perms(CURATE_PERMISSIONS))


class IsCuratorOrReadOnly(BasePermission):
    """API: signed-in users read; only curators (and superusers) write."""

    message = "only curators may change the task library; ask an admin to add you to the curators group"

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or is_curator(request.user)
