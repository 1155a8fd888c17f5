import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from core.permissions import CURATORS, VIEWERS

# role -> group; "admin" is a superuser (every permission) and needs no group.
ROLES = {
    "curator": CURATORS,
    "viewer": VIEWERS,
    "operator": "operators",
    "reviewer": "reviewers",
    "admin": None,
}
ROLE_GROUPS = [group for group in ROLES.values() if group]
PASSWORD_ENV = "CRUCIBLE_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create a console user with a role: curator (edit, validate, quarantine, approve, pin "
        "task sets; create review queues), operator (launch and cancel runs, acknowledge alerts, "
        "create review queues), reviewer (label the review items assigned to them), viewer (read "
        f"only) or admin (a superuser: everything). The password is read from ${PASSWORD_ENV}, or "
        "asked for on a terminal. For an existing user the role is replaced (and the password "
        "set when one is given)."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=sorted(ROLES), required=True)
        parser.add_argument("--email", default="")

    def _password(self) -> str | None:
        if os.environ.get(PASSWORD_ENV):
            return os.environ[PASSWORD_ENV]
        if not sys.stdin.isatty():
            return None
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first or None

    @transaction.atomic
    def handle(self, *args, username: str, role: str, email: str, **_):
        group = None
        if ROLES[role] is not None:
            try:
                group = Group.objects.get(name=ROLES[role])
            except Group.DoesNotExist:
                raise CommandError(
                    f"group {ROLES[role]!r} is missing; run `python manage.py migrate`"
                ) from None
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        password = self._password()
        if user is None:
            if not password:
                raise CommandError(f"no password: set ${PASSWORD_ENV} or run this on a terminal")
            user = User.objects.create_user(username=username, email=email, password=password)
            done = "created"
        else:
            if password:
                user.set_password(password)
                user.save(update_fields=["password"])
            done = "updated"
        admin = role == "admin"
        if user.is_superuser != admin or user.is_staff != admin:
            user.is_superuser = user.is_staff = admin
            user.save(update_fields=["is_superuser", "is_staff"])
        user.groups.remove(*Group.objects.filter(name__in=ROLE_GROUPS))
        if group is not None:
            user.groups.add(group)
        self.stdout.write(f"{done} user {username} with role {role}")
