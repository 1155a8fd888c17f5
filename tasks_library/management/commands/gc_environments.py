import json

from django.core.management.base import BaseCommand

from sandboxes.environments.mount import store
from sandboxes.environments.store import tree_size
from tasks_library.environments import store_keys_in_use


class Command(BaseCommand):
    help = (
        "Remove built environments that no task version uses from the environment store "
        "(CRUCIBLE_ENVIRONMENT_STORE), and what builds that died left behind; keeps the roots of "
        "the runtimes this machine serves (python3.13). Run it on each machine with a store."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list, remove nothing")
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args, dry_run: bool, json: bool = False, **options):
        target = store()
        keep = store_keys_in_use()
        removed, freed = [], 0
        for build_hash in target.published():
            if build_hash in keep:
                continue
            freed += tree_size(target.path(build_hash))
            removed.append(build_hash)
            if not dry_run:
                target.remove(build_hash)
        leftovers = [] if dry_run else target.remove_abandoned_builds()
        outcome = {
            "removed": removed,
            "kept": sorted(set(target.published()) & keep),
            "freed_bytes": freed,
            "abandoned_builds": leftovers,
            "dry_run": dry_run,
        }
        if json:
            self.stdout.write(_dumps(outcome))
        else:
            self.stdout.write(
                f"{'would remove' if dry_run else 'removed'} {len(removed)} environment(s), "
                f"{freed / 2**20:.1f} MiB; kept {len(outcome['kept'])}"
            )


def _dumps(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True)
