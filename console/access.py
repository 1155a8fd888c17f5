"""Who may read the operations console: one rule for its pages, its JSON APIs and its websockets.

* ``CRUCIBLE_CONSOLE_PUBLIC`` true (the default, the embedded laptop console): anyone, signed in
  or not, may read the run pages, trajectories, the sandbox pool and their JSON APIs, and watch
  runs live, read-only.
* false (a shared deployment): only active signed-in users who hold ``training.view_trainingrun``
  (globally, or for the run at hand through an object-permission backend), superusers, and members
  of any role group (``curators``, ``operators``, ``reviewers``, ``viewers``). Anyone else is refused:

  ===================  =======================================  ==========================
  who                  a page                                   a JSON API
  ===================  =======================================  ==========================
  anonymous            302 to the login page (``?next=`` back)  403 ``{"error"|"detail"}``
  signed in, no role   403 with what to ask an admin for        403 ``{"error"|"detail"}``
  ===================  =======================================  ==========================

  The websocket accepts and closes at once with 4403 (:mod:`console.consumers`).

Writes (launch, resume, cancel, acknowledge, review labels) keep their own, stricter rules.

Use :func:`console_read_page` on a function view that renders HTML, :func:`console_read_json` on
one that answers JSON, :class:`ConsoleRead` as a DRF permission class, and :func:`may_watch_run`
anywhere else. A view with a ``run_id`` URL argument is checked for that run.
"""

from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from rest_framework.permissions import BasePermission

from console.env import env_bool

NO_ROLE = (
    "your account has no role that may read the console: ask an admin to add you to the viewers group "
    "(or to give you training.view_trainingrun)"
)
SIGN_IN = "sign in to read the console (CRUCIBLE_CONSOLE_PUBLIC is off)"


def console_public() -> bool:
    """``settings.CRUCIBLE_CONSOLE_PUBLIC`` when the settings define it, else the environment
    variable of that name (default true: anonymous read-only viewers)."""
    value = getattr(settings, "CRUCIBLE_CONSOLE_PUBLIC", None)
    if value is None:
        return env_bool("CRUCIBLE_CONSOLE_PUBLIC", True)
    return bool(value)


def may_watch_run(user, run_id: int | None = None) -> bool:
    """True when ``user`` (a Django user, ``AnonymousUser`` or None) may read the console: see the
    module docstring. ``run_id`` names the run at hand (for object permissions); None asks about the
    console's read-only pages in general. Reads the database only when the console is private."""
    if console_public():
        return True
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser or user.has_perm("training.view_trainingrun"):
        return True
    if run_id is not None:
        from training.models import TrainingRun

        run = TrainingRun.objects.filter(pk=run_id).first()
        if run is not None and user.has_perm("training.view_trainingrun", run):
            return True
    return user.groups.exists()


def _signed_in(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated)


def page_refusal(request: HttpRequest) -> HttpResponse:
    """The answer to a page read the console refuses: the login page for an anonymous visitor,
    else 403 saying which role to ask for."""
    if not _signed_in(request):
        return redirect_to_login(request.get_full_path())
    return HttpResponseForbidden(NO_ROLE)


def json_refusal(request: HttpRequest) -> JsonResponse:
    """The answer to a JSON read the console refuses: 403 ``{"error": why}``."""
    return JsonResponse({"error": NO_ROLE if _signed_in(request) else SIGN_IN}, status=403)


def _read_guard(refusal):
    """A decorator for function views: readers the console refuses get ``refusal(request)``; a
    ``run_id`` URL argument is checked for that run."""

    def decorate(view):
        @wraps(view)
        def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not may_watch_run(request.user, kwargs.get("run_id")):
                return refusal(request)
            return view(request, *args, **kwargs)

        return checked

    return decorate


console_read_page = _read_guard(page_refusal)
"""Decorate a function view that renders a console page: refused readers get :func:`page_refusal`."""

console_read_json = _read_guard(json_refusal)
"""Decorate a function view that answers JSON: refused readers get :func:`json_refusal`."""


class ConsoleRead(BasePermission):
    """DRF: the console's read rule. DRF answers an anonymous caller 403 ``{"detail": ...}`` (the
    session authenticator comes first, so no 401 challenge) and a user without a role 403 with
    :attr:`message`."""

    message = NO_ROLE

    def has_permission(self, request, view) -> bool:
        return may_watch_run(request.user, view.kwargs.get("run_id"))
