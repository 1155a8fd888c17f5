from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.errors import InputError
from tasks_library.environment_image import DEFAULT_BASE, default_output, environment_image_write
from tasks_library.environments import environment_get


class Command(BaseCommand):
    help = (
        "Write the build context of an environment version as a container image: a Dockerfile "
        "(the Python sandbox image plus the environment built into its store by the same code, "
        "packages from the local build's lock with their sha256, run as a non-root user), "
        "environment.json, and the Deployment of its sandbox pool (sandbox-deployment.json), "
        "whose pods consume this environment's own queue. Builds it here first."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment", help="an id, a content-hash prefix or a name")
        parser.add_argument(
            "--output", "-o", type=Path, help="directory (default var/images/NAME-HASH12)"
        )
        parser.add_argument(
            "--base-image",
            default=DEFAULT_BASE,
            help=f"the Python sandbox image to build on (default {DEFAULT_BASE})",
        )
        parser.add_argument(
            "--image", help="the image reference the Deployment runs (default crucible-env-HASH12)"
        )

    def handle(self, *args, environment, output, base_image, image, **options):
        try:
            version = environment_get(environment)
            target = output or default_output(version, Path(settings.VAR_DIR) / "images")
            written = environment_image_write(
                environment=version,
                output=target,
                base_image=base_image,
                image=image or f"crucible-env-{version.content_hash[:12]}:latest",
            )
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        for path in written:
            self.stdout.write(str(path))
