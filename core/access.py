"""How the console's pages, JSON APIs and websockets enforce its rules
(:mod:`core.permissions`).

Reading (:func:`~core.permissions.may_read_console`) is refused this way:

===================  =======================================  ==========================
who                  a page                                   a JSON API
===================  =======================================  ==========================
anonymous            302 to the login page (``?next=`` back)  401 ``{"error"|"detail"}``
signed in, no role   403 with what to ask an admin for        403 ``{"error"|"detail"}``
===================  =======================================  ==========================

A 401 carries ``WWW-Authenticate: Bearer realm="crucible"`` (:data:`CHALLENGE`): a script signs in
with a personal API key (``console/apikeys.py``). The websocket accepts and closes at once with
4403 (:mod:`console.consumers`).

Use :func:`console_read_page` on a function view that renders HTML, :func:`console_read_json` on
one that answers JSON, :class:`ConsoleRead` as a DRF permission class for the console's reads and
:class:`IsCuratorOrReadOnly` for the task library's API. A view with a ``run_id`` URL argument is
checked for that run. Writes call their rule in the service or view that does them.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.permissions import SAFE_METHODS, BasePermission

from core.permissions import (
    NO_ROLE,
    NOT_CURATOR,
    SIGN_IN,
    is_curator,
    may_read_console,
    may_read_library,
    signed_in,
)


def page_refusal(request: HttpRequest) -> HttpResponse:
    """The answer to a page read the console refuses: the login page for an anonymous visitor,
    else 403 saying which role to ask for (raised: the project's ``handler403`` renders it as a
    console page with a way back).

    Raises:
        PermissionDenied: a signed-in user without a role.
    """
    if not signed_in(getattr(request, "user", None)):
        return redirect_to_login(request.get_full_path())
    raise PermissionDenied(NO_ROLE)


CHALLENGE = 'Bearer realm="crucible"'


def json_refusal(request: HttpRequest) -> JsonResponse:
    """The answer to a JSON read the console refuses: 403 ``{"error": why}`` for a user without
    a role, 401 with the :data:`CHALLENGE` for a caller not signed in."""
    if signed_in(getattr(request, "user", None)):
        return JsonResponse({"error": NO_ROLE}, status=403)
    response = JsonResponse({"error": SIGN_IN}, status=401)
    response["WWW-Authenticate"] = CHALLENGE
    return response


def _read_guard(refusal):
    """A decorator for function views: readers the console refuses get ``refusal(request)``; a
    ``run_id`` URL argument is checked for that run."""

    def decorate(view):
        @wraps(view)
        def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not may_read_console(request.user, kwargs.get("run_id")):
                return refusal(request)
            return view(request, *args, **kwargs)

        return checked

    return decorate


console_read_page = _read_guard(page_refusal)
"""Decorate a function view that renders a console page: refused readers get
:func:`page_refusal`."""

console_read_json = _read_guard(json_refusal)
"""Decorate a function view that answers JSON: refused readers get :func:`json_refusal`."""


class ConsoleRead(BasePermission):
    """DRF: the console's read rule. DRF answers an anonymous caller 401 ``{"detail": ...}`` with
    the API key class's challenge (it comes first) and a user without a role 403 with
    :attr:`message`."""

    message = NO_ROLE

    def has_permission(self, request, view) -> bool:
        return may_read_console(request.user, view.kwargs.get("run_id"))


class IsCuratorOrReadOnly(BasePermission):
    """DRF, the task library's API: signed-in users read (with a role while the console is
    private); only curators (and superusers) write."""

    def has_permission(self, request, view) -> bool:
        if not signed_in(request.user):
            return False
        if request.method in SAFE_METHODS:
            self.message = NO_ROLE
            return may_read_library(request.user)
        self.message = NOT_CURATOR
        return is_curator(request.user)


def rule_permission(*, write, message: str, read=None) -> type[BasePermission]:
    """A DRF permission class from the rules of :mod:`core.permissions`: safe methods
    need ``read(user, run_id)`` (default: the console's read rule, checked for the view's
    ``run_id``), other methods ``write(user)``; a refusal answers 403 with ``message`` (or
    :data:`~core.permissions.NO_ROLE` for a read). The write API uses the same rules as
    the pages, so a script may do exactly what its user may do in the browser."""
    read = read or may_read_console

    class RulePermission(BasePermission):
        def has_permission(self, request, view) -> bool:
            if request.method in SAFE_METHODS:
                self.message = NO_ROLE
                return read(request.user, view.kwargs.get("run_id"))
            self.message = message
            return signed_in(request.user) and write(request.user)

    name = "".join(part.title() for part in write.__name__.split("_"))  # MayLaunchRun
    RulePermission.__name__ = RulePermission.__qualname__ = name
    return RulePermission
