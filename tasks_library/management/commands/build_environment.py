import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import InputError
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import EnvironmentSpecError, parse
from sandboxes.environments.store import EnvironmentBuildError, manifest_digest
from tasks_library.environments import environment_build, environment_get


class Command(BaseCommand):
    help = (
        "Build an environment version into the environment store (CRUCIBLE_ENVIRONMENT_STORE): its "
        "runtime's root filesystem (python3.13: Debian trixie by mmdebstrap) and its pinned "
        "packages (pip --target; npm ci), once; a second build is a cache hit. Records what was "
        "installed, sizes, seconds and the log on the environment version. --spec FILE builds "
        "from a JSON {runtime, packages, debian_packages} without the database (what "
        "environment_image's Dockerfile runs)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "environment", nargs="?", help="an id, a content-hash prefix or a name (its newest)"
        )
        parser.add_argument("--spec", type=Path, help="a JSON file {runtime, packages}")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args, environment, spec, json: bool = False, **options):
        say = self.stderr.write
        if bool(environment) == bool(spec):
            raise CommandError("give an environment (id, hash prefix or name) or --spec FILE")
        try:
            if spec:
                built = self._from_spec(spec, say)
                outcome = {"key": built.key, "cache_hit": built.cache_hit}
            else:
                version = environment_get(environment)
                built = environment_build(environment=version, progress=say)
                outcome = {
                    "environment": str(version),
                    "key": built.key,
                    "cache_hit": built.cache_hit,
                    "build_seconds": version.build_seconds,
                    "size_bytes": version.size_bytes,
                    "resolved": version.resolved_packages,
                }
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_dumps(outcome))
        else:
            self.stdout.write(
                f"{outcome.get('environment', spec)}: {outcome['key']} "
                + ("(cache hit)" if outcome["cache_hit"] else "(built)")
            )

    def _from_spec(self, path: Path, say):
        try:
            content = json.loads(path.read_text())
            built = materialise(
                parse(
                    content.get("runtime", ""),
                    content.get("packages", []),
                    source_builds=content.get("source_builds", False),
                    debian_packages=content.get("debian_packages", []),
                ),
                progress=say,
                lock=content.get("lock") or None,
            )
        except (OSError, ValueError, AttributeError) as exc:
            if isinstance(exc, EnvironmentSpecError):
                raise CommandError(f"{path}: {exc}") from exc
            raise CommandError(f"{path}: not a JSON object {{runtime, packages}}: {exc}") from exc
        except EnvironmentBuildError as exc:
            raise CommandError(f"{path}: {exc}") from exc
        expected = content.get("key")
        if expected and expected != built.key:
            raise CommandError(
                f"{path}: built {built.key}, but the spec expects {expected}: this builder "
                "differs from the one that wrote the spec"
            )
        manifest = content.get("packages_manifest_sha256")
        if manifest and built.packages and manifest_digest(built.packages) != manifest:
            raise CommandError(
                f"{path}: the packages built here differ from the ones the spec was written from "
                f"(manifest {manifest_digest(built.packages)}, expected {manifest}); nothing of "
                "this build may be used"
            )
        return built


def _dumps(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True)
