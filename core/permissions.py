"""The console's roles, and every rule of who may do what: one module, read by every app.

Roles are groups, made by migrations (an admin is a superuser and holds every permission):

===========  ==========================================================  ========================
group        may                                                         made by
===========  ==========================================================  ========================
curators     edit the task library (new versions), validate, quarantine,  tasks_library 0003
             approve, pin task sets; launch, cancel and resume runs;
             acknowledge alerts; manage review queues, review, submit
             task drafts
operators    launch, cancel and resume runs; acknowledge alerts; create  console 0002
             review queues and assign their items
reviewers    label the review items assigned to them, write task drafts  console 0002
viewers      read                                                        tasks_library 0003
===========  ==========================================================  ========================

Reading the console (:func:`may_read_console`) depends on ``CRUCIBLE_CONSOLE_PUBLIC`` too; the
task library always needs a sign-in (it holds hidden tests and reference solutions). How views,
APIs and websockets enforce these rules is :mod:`core.access`.

Every rule takes a Django user, ``AnonymousUser`` or None, and answers a bool. The rules name
permissions by their strings (``"training.view_trainingrun"``): the core imports no app.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings

from core.env import env_bool

CURATORS = "curators"
OPERATORS = "operators"
REVIEWERS = "reviewers"
VIEWERS = "viewers"

# What a curator does writes task versions and task sets: both are needed.
CURATE_PERMISSIONS = (
    "tasks_library.add_taskversion",
    "tasks_library.change_taskversion",
    "tasks_library.add_taskset",
    "tasks_library.change_taskset",
)
RUN_MODEL = "training.TrainingRun"  # looked up by label (the core imports no app)

NO_ROLE = (
    "your account has no role that may read the console: ask an admin to add you to the viewers "
    "group (or to give you training.view_trainingrun)"
)
SIGN_IN = "sign in to read the console (CRUCIBLE_CONSOLE_PUBLIC is off)"
NOT_CURATOR = (
    "only curators may change the task library; ask an admin to add you to the curators group"
)


def signed_in(user) -> bool:
    """True for an authenticated user (not None, not anonymous)."""
    return bool(user is not None and user.is_authenticated)


def console_public() -> bool:
    """``settings.CRUCIBLE_CONSOLE_PUBLIC`` when the settings define it, else the environment
    variable of that name (default true, anonymous read-only viewers, except with
    ``CRUCIBLE_PRODUCTION`` on: private)."""
    value = getattr(settings, "CRUCIBLE_CONSOLE_PUBLIC", None)
    if value is None:
        return env_bool("CRUCIBLE_CONSOLE_PUBLIC", not env_bool("CRUCIBLE_PRODUCTION", False))
    return bool(value)


def may_read_console(user, run_id: int | None = None) -> bool:
    """May ``user`` read the console's run, trajectory, review and pool pages, their JSON APIs
    and websockets?

    * ``CRUCIBLE_CONSOLE_PUBLIC`` true (the default, the embedded laptop console): anyone.
    * false (a shared deployment): active signed-in users who hold ``training.view_trainingrun``
      (globally, or for run ``run_id`` through an object-permission backend), superusers, and
      members of any role group. Reads the database only in this mode.
    """
    if console_public():
        return True
    if not signed_in(user) or not user.is_active:
        return False
    if user.is_superuser or user.has_perm("training.view_trainingrun"):
        return True
    if run_id is not None:
        run = apps.get_model(RUN_MODEL).objects.filter(pk=run_id).first()
        if run is not None and user.has_perm("training.view_trainingrun", run):
            return True
    return user.groups.exists()


def may_read_library(user) -> bool:
    """Read the task library (pages and API): a sign-in in either console mode, and while the
    console is private a role as for :func:`may_read_console`."""
    return signed_in(user) and may_read_console(user)


def is_curator(user) -> bool:
    """May change the task library: curators and superusers."""
    return signed_in(user) and user.has_perms(CURATE_PERMISSIONS)


def may_launch_run(user) -> bool:
    """Launch a run: holders of ``training.add_trainingrun`` (operators, superusers), curators."""
    return signed_in(user) and (user.has_perm("training.add_trainingrun") or is_curator(user))


def may_operate_run(user) -> bool:
    """Cancel or resume a run and acknowledge its alerts: holders of
    ``training.change_trainingrun`` (operators, superusers) and curators."""
    return signed_in(user) and (user.has_perm("training.change_trainingrun") or is_curator(user))


def may_manage_queues(user) -> bool:
    """Create review queues and (re)assign their items: curators, operators, superusers."""
    return signed_in(user) and (is_curator(user) or user.has_perm("review.add_reviewqueue"))


def may_review(user) -> bool:
    """Be assigned review items and label them: reviewers, curators, superusers."""
    return signed_in(user) and (is_curator(user) or user.has_perm("review.add_reviewlabel"))


def may_submit_drafts(user) -> bool:
    """Submit a task draft into the task library: curators (and superusers)."""
    return is_curator(user)


def role_of(user) -> str:
    """The role ``user`` works in, for the page they land on after signing in: ``admin``
    (superusers), ``curator``, ``operator`` (may launch runs), ``reviewer`` (may review, nothing
    more), ``viewer`` (may read the console), or ``""``."""
    if not signed_in(user):
        return ""
    if user.is_superuser:
        return "admin"
    if is_curator(user):
        return "curator"
    if may_launch_run(user):
        return "operator"
    if may_review(user):
        return "reviewer"
    return "viewer" if may_read_console(user) else ""
