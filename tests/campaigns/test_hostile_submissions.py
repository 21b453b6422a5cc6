"""Issue 9, item 20: ``submit`` retries with jittered exponential backoff until an overall
deadline; contention no longer makes submissions fail, and a lost answer never makes a second
entry."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from ledger.core.bundle import Bundle
from ledger.core.errors import CannotCheck
from ledger.http.server import make_app
from ledger.log import Log
from ledger.submit import submit_bundle
from tests.helpers.ledgers import add_node
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import bundle_files, fields
from tests.ledger.test_mirror import make_origin, node_key


def scripted(app: ASGIApp, plan: list[Any]) -> ASGIApp:
    """``app`` with the next answers to POST /api/v1/submit taken from ``plan``: 409 (moved on),
    429, or "lost" (the submission is processed, the client gets an HTML 503 instead)."""

    async def send_json(send: Send, status: int, body: bytes, extra: list[Any]) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *extra]})
        await send({"type": "http.response.body", "body": body})

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and plan:
            kind = plan.pop(0)
            if kind == "lost":
                async def swallow(message: Any) -> None:
                    pass

                await app(scope, receive, swallow)
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"text/html")]})
                await send({"type": "http.response.body", "body": b"<html>busy</html>"})
                return
            while (await receive()).get("more_body"):
                pass
            if kind == 409:
                await send_json(send, 409, b'{"error":"the log has moved on; sign again"}', [])
            else:
                await send_json(send, 429, b'{"error":"slow down"}',
                                [(b"retry-after", b"9" * 5000)])
            return
        await app(scope, receive, send)

    return wrapped


@pytest.fixture()
def log(tmp_path: Path) -> Iterator[Log]:
    lg = make_origin(tmp_path / "log", 2)
    yield lg
    lg.close()


def test_backoff_is_exponential_jittered_and_outlasts_contention(log: Log) -> None:
    plan: list[Any] = [409] * 7 + [429]
    waits: list[float] = []
    with BackgroundServer(scripted(make_app(log.home, accept_submissions=True), plan)) as srv:
        done = submit_bundle(srv.url, Bundle.from_files(bundle_files(50)), fields(50),
                             node_key(log), log.verifier, sleep=waits.append, rand=lambda: 0.5)
    assert done.attempts == 9  # main gave up after 5
    assert waits[:7] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2]  # base * 2**k, factor 0.5 + 0.5
    # a 429 waits its Retry-After (a garbage one, 5,000 digits, counts as 1 s, no crash) times
    # [1, 1.5), not the doubling backoff (that starved a submission behind newer ones)
    assert waits[7] == 1.25
    spread: list[float] = []
    plan[:] = [409, 409]
    with BackgroundServer(scripted(make_app(log.home, accept_submissions=True), plan)) as srv:
        submit_bundle(srv.url, Bundle.from_files(bundle_files(51)), fields(51), node_key(log),
                      log.verifier, sleep=spread.append)
    assert 0.025 <= spread[0] < 0.075 and 0.05 <= spread[1] < 0.15  # jitter in [0.5, 1.5)


def test_deadline_ends_the_retries(log: Log) -> None:
    plan: list[Any] = [409] * 1000
    with BackgroundServer(scripted(make_app(log.home, accept_submissions=True), plan)) as srv:
        with pytest.raises(CannotCheck, match=r"gave up after \d+ attempts in 1 s.*moved on"):
            submit_bundle(srv.url, Bundle.from_files(bundle_files(52)), fields(52),
                          node_key(log), log.verifier, timeout=1.0)
    assert 1000 - len(plan) >= 3


def test_lost_answer_makes_no_second_entry(log: Log) -> None:
    size = log.store.size()
    plan: list[Any] = ["lost"]
    with BackgroundServer(scripted(make_app(log.home, accept_submissions=True), plan)) as srv:
        done = submit_bundle(srv.url, Bundle.from_files(bundle_files(53)), fields(53),
                             node_key(log), log.verifier, sleep=lambda s: None)
    assert log.store.size() == size + 1 and done.index == size


def test_concurrent_submissions_all_get_in(log: Log) -> None:
    keys = [node_key(log), add_node(log, "n2")]
    size = log.store.size()
    errors: list[BaseException] = []
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:

        def one(i: int) -> None:
            try:
                submit_bundle(srv.url, Bundle.from_files(bundle_files(100 + i)), fields(100 + i),
                              keys[i % 2], log.verifier, timeout=120)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
    assert not errors, errors
    assert log.store.size() == size + 8


def test_odd_entry_shapes_are_refused_by_the_server(log: Log) -> None:
    """Item 8's shape rules apply to submissions too (``entries.check_entry_shape``)."""
    from tests.ledger.test_submit import body_for, post

    sk = node_key(log)
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        for change in ({"checks": [{"id": "x", "status": "maybe", "detail": ""}]},
                       {"obligations": {"PO1": "t"}}, {"kernel": {"name": ["k"]}}):
            r = post(srv.url, body_for(log, sk, 60, **change), sk)
            assert r.status_code == 400 and "bundle entry" in r.text, (change, r.text)
