"""An environment version's "built" time is when its layers were built, not the last cache check:
building it again (a cache hit) keeps the build's time and seconds."""

import pytest

from tasks_library.environments import environment_build, environment_create
from tests.environments import PYTEST_PACKAGES, built


@pytest.mark.django_db
def test_a_cache_hit_keeps_the_build_time():
    layers = built("python3.11-pytest")  # in the store once per machine
    published = layers.packages.published_at
    environment = environment_create(
        name="pytest", runtime="python3.11", packages=PYTEST_PACKAGES, author="cora"
    )
    first = environment_build(environment=environment)
    assert first.cache_hit
    environment.refresh_from_db()
    assert environment.built_at.timestamp() == pytest.approx(published, abs=1e-3)
    assert environment.build_seconds == layers.packages.record["seconds"]
    environment_build(environment=environment)
    environment.refresh_from_db()
    assert environment.built_at.timestamp() == pytest.approx(published, abs=1e-3)
