"""Who may do what in the task library.

Two groups, created by migration ``0003_curator_viewer_groups``:

* ``curators`` hold the add/change/view permissions of the task library's models and
  may edit tasks (new versions), validate, quarantine, approve and pin task sets;
* ``viewers`` hold the view permissions.

Reading needs a signed-in user in either console mode (the library holds hidden tests and
reference solutions); while the console is private (``CRUCIBLE_CONSOLE_PUBLIC`` off) it also
needs a role, the console's own read rule (:func:`console.access.may_watch_run`).

Superusers hold every permission, so they may do everything.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from console.access import NO_ROLE, may_watch_run

NOT_CURATOR = (
    "only curators may change the task library; ask an admin to add you to the curators group"
)
CURATORS = "curators"
VIEWERS = "viewers"

# What a curator does writes task versions and task sets: both are needed.
CURATE_PERMISSIONS = (
    "tasks_library.add_taskversion",
    "tasks_library.change_taskversion",
    "tasks_library.add_taskset",
    "tasks_library.change_taskset",
)


def is_curator(user) -> bool:
    """True when ``user`` may change the task library (a curator or a superuser)."""
    return bool(user and user.is_authenticated and user.has_perms(CURATE_PERMISSIONS))


class IsCuratorOrReadOnly(BasePermission):
    """API: signed-in users read (with a role while the console is private); only curators
    (and superusers) write."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            self.message = NO_ROLE
            return may_watch_run(request.user)
        self.message = NOT_CURATOR
        return is_curator(request.user)
