"""The console's micro-cache (core/response_cache.py) in front of the real Django ASGI
application, on the session's Redis: a repeated GET is answered from it, only to the same
credentials; any write through the web tier, a committed write to a shown row or a live event
drops every kept answer; what must not be kept is not; Redis down costs nothing but the cache."""

from __future__ import annotations

import asyncio
import re

import pytest
from channels.testing import HttpCommunicator
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.test import Client

from core.events import broadcast_run_event
from core.response_cache import ResponseCache, view_cacheable
from tests.review.review_seed import make_roles, make_user
from training.models import TrainingRun

pytestmark = pytest.mark.django_db(transaction=True)

HIT = (b"x-crucible-cache", b"hit")


def cache(ttl_ms: int = 60_000, *, redis_url: str | None = None, app=None) -> ResponseCache:
    return ResponseCache(
        app or get_asgi_application(),
        redis_url=redis_url or settings.REDIS_URL,
        # the settings' prefix: the epoch the writes' and events' bumps raise (each session's
        # cookie is new, so no earlier test's answer can match)
        prefix=settings.WEB_RESPONSE_CACHE_PREFIX,
        ttl_ms=ttl_ms,
        cacheable=view_cacheable,
        max_bytes=settings.WEB_RESPONSE_CACHE_MAX_BYTES,
        csrf_cookie=settings.CSRF_COOKIE_NAME,
    )


def signed_in(name: str, role: str = "viewer") -> bytes:
    """The Cookie header of a browser signed in as a new user ``name`` that holds its CSRF
    cookie (what a browser sends after its first page)."""
    make_roles()
    client = Client()
    client.force_login(make_user(name, role))
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return f"sessionid={session}; csrftoken={'c' * 32}".encode()


def get(app, path: str, cookie: bytes, method: str = "GET") -> dict:
    headers = [(b"host", b"127.0.0.1"), (b"cookie", cookie)]
    if method != "GET":
        headers.append((b"x-csrftoken", b"c" * 32))
    communicator = HttpCommunicator(app, method, path, headers=headers)
    return asyncio.run(communicator.get_response(timeout=60))  # a loaded CI machine is slow


def hit(response: dict) -> bool:
    return HIT in response["headers"]


def new_run(name: str) -> TrainingRun:
    from tasks_library.models import TaskSet  # noqa: PLC0415

    return TrainingRun.objects.create(
        task_set=TaskSet.objects.create(name=name), total_steps=10, name=name
    )


def test_a_repeated_get_is_answered_from_the_cache_for_the_same_credentials_only():
    app = cache()
    new_run("first-run")
    vic, ann = signed_in("viewer_vic"), signed_in("viewer_ann")
    first = get(app, "/api/runs/", vic)
    again = get(app, "/api/runs/", vic)
    assert first["status"] == 200 and not hit(first)
    assert hit(again) and again["body"] == first["body"] and b"first-run" in again["body"]
    # another viewer, or the same path anonymously, never gets vic's answer
    assert not hit(get(app, "/api/runs/", ann))
    assert not hit(get(app, "/api/runs/", b""))  # the console is public here
    # a page with forms renews the CSRF cookie on every answer: still kept, for vic only
    page = get(app, "/", vic)
    assert page["status"] == 200 and not hit(page)
    assert hit(get(app, "/", vic)) and not hit(get(app, "/", ann))
    assert b"viewer_vic" in get(app, "/", vic)["body"]
    assert b"viewer_vic" not in get(app, "/", ann)["body"]


def test_writes_and_live_events_drop_every_kept_answer():
    app = cache()
    vic = signed_in("viewer_vic")
    get(app, "/api/runs/", vic)
    assert hit(get(app, "/api/runs/", vic))
    # a committed write to a row the console shows (a run launched by the trainer's process)
    new_run("second-run")
    answer = get(app, "/api/runs/", vic)
    assert not hit(answer) and b"second-run" in answer["body"]
    assert hit(get(app, "/api/runs/", vic))
    # a live event (a step recorded, a status changed) drops them too
    broadcast_run_event(1, {"type": "step"})
    assert not hit(get(app, "/api/runs/", vic))
    # so does any unsafe request through the web tier, even a refused one
    assert hit(get(app, "/api/runs/", vic))
    assert get(app, "/api/runs/", vic, method="POST")["status"] >= 400
    assert not hit(get(app, "/api/runs/", vic))


def test_an_answer_is_kept_only_for_its_time_to_live():
    app = cache(ttl_ms=300)
    vic = signed_in("viewer_vic")
    get(app, "/api/runs/", vic)
    assert hit(get(app, "/api/runs/", vic))
    asyncio.run(asyncio.sleep(0.4))
    assert not hit(get(app, "/api/runs/", vic))


def test_each_hit_carries_a_fresh_csp_nonce_in_its_header_and_its_page():
    nonce = b"QUJDREVGR0hJSktMTU5PUA=="  # django-csp's shape: 16 random bytes in base64

    async def page(scope, receive, send):
        policy = b"default-src 'self'; script-src 'self' 'nonce-" + nonce + b"'"
        headers = [(b"content-security-policy", policy), (b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'<script nonce="' + nonce + b'">'})

    app = cache(app=page)
    vic = signed_in("viewer_vic")
    seen = []
    for _ in range(3):
        answer = get(app, "/api/runs/", vic)
        policy = dict(answer["headers"])[b"content-security-policy"]
        sent = re.search(rb"'nonce-([^']+)'", policy).group(1)
        assert answer["body"] == b'<script nonce="' + sent + b'">'
        seen.append((sent, hit(answer)))
    assert [was_hit for _nonce, was_hit in seen] == [False, True, True]
    assert len({sent for sent, _hit in seen}) == 3


def test_the_nonce_is_fresh_whatever_the_case_of_the_header_name():
    # Django sends its headers as written: "Content-Security-Policy"
    nonce = b"UVJTVFVWV1hZWmFiY2RlZg=="

    async def page(scope, receive, send):
        policy = b"script-src 'self' 'nonce-" + nonce + b"'"
        headers = [(b"Content-Security-Policy", policy)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'<script nonce="' + nonce + b'">'})

    app = cache(app=page)
    vic = signed_in("viewer_vic")
    answers = [get(app, "/api/runs/", vic) for _ in range(3)]
    policies = [dict(answer["headers"])[b"Content-Security-Policy"] for answer in answers]
    assert list(map(hit, answers)) == [False, True, True] and len(set(policies)) == 3


def test_views_not_named_and_answers_that_must_not_be_kept_are_not():
    vic = signed_in("viewer_vic")
    app = cache()
    # /healthz, /metrics and the sign-in page are not among the cached views
    assert not view_cacheable("/healthz") and not view_cacheable("/accounts/login/")
    assert view_cacheable("/api/runs/") and not view_cacheable("/admin/")
    get(app, "/healthz", vic)
    assert not hit(get(app, "/healthz", vic))

    def answering(status: int, headers: list):
        async def inner(scope, receive, send):
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b"x"})

        return cache(app=inner)

    for status, headers in [
        (404, []),
        (200, [(b"set-cookie", b"sessionid=other; Path=/")]),
        (200, [(b"set-cookie", b"csrftoken=" + b"d" * 32 + b"; Path=/")]),  # not the request's
        (200, [(b"cache-control", b"no-cache, no-store, must-revalidate, private")]),
        (200, [(b"vary", b"Cookie, User-Agent")]),
    ]:
        fake = answering(status, headers)
        get(fake, "/api/runs/", vic)
        assert not hit(get(fake, "/api/runs/", vic)), (status, headers)
    renewing = answering(200, [(b"set-cookie", b"csrftoken=" + b"c" * 32 + b"; Path=/")])
    get(renewing, "/api/runs/", vic)
    assert hit(get(renewing, "/api/runs/", vic))


def test_redis_down_answers_uncached():
    app = cache(redis_url="redis://127.0.0.1:1/0")  # nothing listens on port 1
    vic = signed_in("viewer_vic")
    answers = [get(app, "/api/runs/", vic) for _ in range(2)]
    assert [a["status"] for a in answers] == [200, 200] and not any(map(hit, answers))


def test_concurrent_misses_of_one_answer_compute_it_once():
    calls = []

    async def slow(scope, receive, send):
        calls.append(scope["path"])
        await asyncio.sleep(0.3)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"computed once"})

    app = cache(app=slow)
    vic = signed_in("viewer_vic")

    async def together():
        headers = [(b"host", b"127.0.0.1"), (b"cookie", vic)]
        communicators = [
            HttpCommunicator(app, "GET", "/api/runs/", headers=headers) for _ in range(5)
        ]
        return await asyncio.gather(*(c.get_response(timeout=60) for c in communicators))

    answers = asyncio.run(together())
    assert len(calls) == 1
    assert [a["body"] for a in answers] == [b"computed once"] * 5
    assert sorted(map(hit, answers)) == [False, True, True, True, True]


def test_an_epoch_redis_lost_never_comes_back_to_an_old_value():
    import redis  # noqa: PLC0415

    app = cache()
    vic = signed_in("viewer_vic")
    get(app, "/api/runs/", vic)
    assert hit(get(app, "/api/runs/", vic))
    # Redis restarted without its data (or the key evicted): whatever epoch comes next, the
    # answers kept under the lost one are not served
    redis.Redis.from_url(settings.REDIS_URL).delete(f"{settings.WEB_RESPONSE_CACHE_PREFIX}:epoch")
    assert not hit(get(app, "/api/runs/", vic))
    assert hit(get(app, "/api/runs/", vic))


def shared_cache(app, shared_bytes: int = 2**20) -> ResponseCache:
    """A cache as another worker process holds it: its own kept answers, the same Redis."""
    return ResponseCache(
        app,
        redis_url=settings.REDIS_URL,
        prefix=settings.WEB_RESPONSE_CACHE_PREFIX,
        ttl_ms=60_000,
        cacheable=view_cacheable,
        max_bytes=settings.WEB_RESPONSE_CACHE_MAX_BYTES,
        shared_bytes=shared_bytes,
        csrf_cookie=settings.CSRF_COOKIE_NAME,
    )


def counting_django(calls: list):
    django_app = get_asgi_application()

    async def app(scope, receive, send):
        calls.append(scope["path"])
        await django_app(scope, receive, send)

    return app


def get_settled(app: ResponseCache, path: str, cookie: bytes) -> dict:
    """A GET, then the wait for what it shares to reach Redis (a server's loop runs on; a
    test's ends with the request)."""

    async def go():
        headers = [(b"host", b"127.0.0.1"), (b"cookie", cookie)]
        answer = await HttpCommunicator(app, "GET", path, headers=headers).get_response(60)
        await app.settled()
        return answer

    return asyncio.run(go())


def shared_keys(epoch: bytes | None = None) -> list[bytes]:
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.WEB_RESPONSE_CACHE_PREFIX
    epoch = epoch or client.get(f"{prefix}:epoch")
    return [key for key in client.keys(f"{prefix}:answer*:{epoch.decode()}")]


def test_an_answer_one_process_kept_is_served_by_the_others_until_a_write():
    calls: list = []
    first, second = shared_cache(counting_django(calls)), shared_cache(counting_django(calls))
    new_run("shared-run")
    vic, ann = signed_in("viewer_vic"), signed_in("viewer_ann")
    computed = get_settled(first, "/api/runs/", vic)
    assert not hit(computed) and calls == ["/api/runs/"]
    # the other process answers it without Django, and then from its own memory
    for _ in range(2):
        answer = get_settled(second, "/api/runs/", vic)
        assert hit(answer) and answer["body"] == computed["body"]
    assert calls == ["/api/runs/"]
    # still per credentials: another viewer's request is computed
    assert not hit(get_settled(second, "/api/runs/", ann)) and len(calls) == 2
    # a committed write renews the epoch and unlinks the old epoch's shared answers
    import redis  # noqa: PLC0415

    epoch = redis.Redis.from_url(settings.REDIS_URL).get(
        f"{settings.WEB_RESPONSE_CACHE_PREFIX}:epoch"
    )
    assert len(shared_keys(epoch)) == 2  # the hash and its byte count
    new_run("after-the-write")
    assert shared_keys(epoch) == []
    answer = get_settled(second, "/api/runs/", vic)
    assert not hit(answer) and b"after-the-write" in answer["body"] and len(calls) == 3


def test_past_its_budget_an_epoch_shares_no_more_and_garbage_in_redis_is_computed_over():
    import redis  # noqa: PLC0415

    calls: list = []
    small = 2000  # bytes: one small API answer, not the run page too
    first, second = (shared_cache(counting_django(calls), small) for _ in range(2))
    run = new_run("budget-run")
    vic = signed_in("viewer_vic")
    get_settled(first, "/api/runs/", vic)
    get_settled(first, f"/runs/{run.pk}/", vic)  # a page of several KB: over the budget
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.WEB_RESPONSE_CACHE_PREFIX
    epoch = client.get(f"{prefix}:epoch").decode()
    held = int(client.get(f"{prefix}:answer-bytes:{epoch}"))
    assert 0 < held <= small
    assert hit(get_settled(second, "/api/runs/", vic))
    assert not hit(get_settled(second, f"/runs/{run.pk}/", vic))
    # whatever else Redis holds under the key is not an answer: computed, never a 500
    for field in client.hkeys(f"{prefix}:answers:{epoch}"):
        client.hset(f"{prefix}:answers:{epoch}", field, b"not json\nbody")
    third = shared_cache(counting_django(calls), small)
    before = len(calls)
    answer = get_settled(third, "/api/runs/", vic)
    assert answer["status"] == 200 and not hit(answer) and len(calls) == before + 1
