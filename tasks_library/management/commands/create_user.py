import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from tasks_library.permissions import CURATORS, VIEWERS

ROLES = {"curator": CURATORS, "viewer": VIEWERS}
PASSWORD_ENV = "CRUCIBLE_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create a console user with a role: curator (edit, validate, quarantine, approve, pin task sets) or "
        f"viewer (read only). The password is read from ${PASSWORD_ENV}, or asked for on a terminal. "
        "For an existing user the role is replaced (and the password set when one is given)."
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
        try:
            group = Group.objects.get(name=ROLES[role])
        except Group.DoesNotExist:
            raise CommandError(f"group {ROLES[role]!r} is missing; run `python manage.py migrate`") from None
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
        user.groups.remove(*Group.objects.filter(name__in=ROLES.values()))
        user.groups.add(group)
        self.stdout.write(f"{done} user {username} with role {role}")
