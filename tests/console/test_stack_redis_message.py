"""A Redis that does not answer is named in the error without its password."""

import pytest
from django.test import override_settings

from console.management.stack import ServiceError, Stack
from tests.ports import free_port


def test_unreachable_redis_error_names_the_url_without_its_password():
    url = f"redis://crucible:hunter2-secret@127.0.0.1:{free_port()}/3"
    with override_settings(REDIS_URL=url, EMBEDDED_REDIS=False):
        stack = Stack()
        with pytest.raises(ServiceError) as caught:
            stack.redis()
    message = str(caught.value)
    assert "hunter2-secret" not in message
    assert "redis://crucible:***@127.0.0.1" in message and "unset REDIS_URL" in message
