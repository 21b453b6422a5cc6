"""``ledger.net.pipeline``: pipelined GETs against a real server on 127.0.0.1 whose answers each
test
scripts (one thread per connection, requests read as they arrive, pipelined or not), and nginx
(tests/ledger/test_publish.py follows a whole ledger through it)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from ledger.core.errors import CannotCheck
from ledger.net.pipeline import MAX_HEAD_BYTES, HandBack, PipelinedGet
from tests.helpers.tcpserver import serving

# answer(connection number, request number on that connection, path) -> the bytes to send, or
# None: close the connection without answering
Answer = Callable[[int, int, str], bytes | None]


def ok(body: bytes, *extra: str, ctype: str = "application/octet-stream") -> bytes:
    head = ["HTTP/1.1 200 OK", f"Content-Type: {ctype}", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def body_of(path: str) -> bytes:
    return f"file {path}\n".encode() * 3


class Scripted:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.lock = threading.Lock()


@contextmanager
def scripted(answer: Answer) -> Iterator[tuple[str, Scripted]]:
    state = Scripted(answer)

    def handle(sock: socket.socket) -> None:
        with state.lock:
            conn = state.connections
            state.connections += 1
        buf, n = b"", 0
        while True:
            while b"\r\n\r\n" not in buf:
                got = sock.recv(65536)
                if not got:
                    return
                buf += got
            head, _, buf = buf.partition(b"\r\n\r\n")
            path = head.split(b"\r\n")[0].split(b" ")[1].decode()
            with state.lock:
                state.requests += 1
            out = state.answer(conn, n, path)
            n += 1
            if out is None:
                return
            sock.sendall(out)

    with serving(handle) as port:
        yield f"http://127.0.0.1:{port}/base", state


def client(url: str, request_timeout: float = 10.0, **kw: int) -> PipelinedGet:
    return PipelinedGet(url, "the test server", request_timeout, 5.0, **kw)


PATHS = [f"api/v1/blobs/{i:064x}" for i in range(700)]


def test_every_answer_in_order_over_a_few_connections() -> None:
    seen: list[str] = []

    def answer(conn: int, n: int, path: str) -> bytes:
        seen.append(path)
        return ok(body_of(path))

    with scripted(answer) as (url, state):
        pipe = client(url, connections=3, depth=50)
        got = pipe.get_many(PATHS, 1 << 20)
    assert got == [body_of(f"/base/{p}") for p in PATHS]
    assert sorted(seen) == sorted(f"/base/{p}" for p in PATHS)  # the base path kept
    assert pipe.requests == len(PATHS) == state.requests
    assert state.connections == 3 and pipe.on


def test_connection_close_every_few_answers_is_followed_on_new_connections() -> None:
    """nginx's keepalive_requests: the 10th answer of a connection says Connection: close and
    the server stops there; the requests written after it are written again."""

    def answer(conn: int, n: int, path: str) -> bytes | None:
        if n == 9:
            return ok(body_of(path), "Connection: close")
        return None if n > 9 else ok(body_of(path))

    with scripted(answer) as (url, state):
        pipe = client(url, connections=2, depth=32)
        got = pipe.get_many(PATHS[:200], 1 << 20)
    assert got == [body_of(f"/base/{p}") for p in PATHS[:200]]
    assert state.connections >= 20 and pipe.on


def test_a_silent_close_after_some_answers_is_followed_too() -> None:
    def answer(conn: int, n: int, path: str) -> bytes | None:
        return None if n == 7 else ok(body_of(path))

    with scripted(answer) as (url, state):
        got = client(url, connections=1, depth=16).get_many(PATHS[:100], 1 << 20)
    assert got == [body_of(f"/base/{p}") for p in PATHS[:100]]
    assert state.connections >= 100 // 7


def test_answers_handed_back_are_none_and_the_rest_still_pipelined() -> None:
    """A 404, a gzip Content-Encoding, an unexpected content type: None for that path (asked
    again one by one, where the one-request client says what is wrong), the others served."""
    odd = {PATHS[3]: b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found",
           PATHS[5]: ok(b"\x1f\x8b...", "Content-Encoding: gzip"),
           PATHS[8]: ok(b"<html></html>", ctype="text/html")}

    def answer(conn: int, n: int, path: str) -> bytes:
        return odd.get(path.removeprefix("/base/")) or ok(body_of(path))

    with scripted(answer) as (url, _):
        pipe = client(url, connections=1)
        got = pipe.get_many(PATHS[:20], 1 << 20)
    for p, g in zip(PATHS[:20], got, strict=True):
        assert g == (None if p in odd else body_of(f"/base/{p}"))
    assert pipe.on


@pytest.mark.parametrize("kind", ["chunked", "no_length", "http10", "interim", "bad_length",
                                  "two_lengths", "bad_header", "huge_head", "closed_at_once",
                                  "closed_inside", "long_error"])
def test_an_answer_it_cannot_frame_switches_pipelining_off(kind: str) -> None:
    """Everything from the odd answer on is None (the caller asks again one by one); what was
    answered before it is kept; the client does not pipeline again until reset (the mirror's
    next sync)."""
    odd = {
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "no_length": b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\nabc",
        "http10": b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        "interim": b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"abc"),
        "bad_length": b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc",
        "two_lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "bad_header": b"HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\nabc",
        "huge_head": b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n",
        "closed_inside": b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\nabc",
        "long_error": b"HTTP/1.1 500 Oops\r\nContent-Length: 1000000\r\n\r\n",
    }

    def answer(conn: int, n: int, path: str) -> bytes | None:
        if kind == "closed_at_once":
            return None
        if path.endswith(PATHS[4]):
            return odd[kind] if kind != "closed_inside" else None
        if kind == "closed_inside" and path.endswith(PATHS[3]):
            return odd[kind]
        return ok(body_of(path))

    with scripted(answer) as (url, _):
        pipe = client(url, connections=1, depth=8)
        got = pipe.get_many(PATHS[:12], 1 << 20)
        assert not pipe.on
        assert pipe.get_many(PATHS[:12], 1 << 20) == [None] * 12  # off until reset()
        pipe.reset()
        assert pipe.on
    if kind == "closed_at_once":
        assert got == [None] * 12
        return
    kept = 3 if kind == "closed_inside" else 4
    assert got[:kept] == [body_of(f"/base/{p}") for p in PATHS[:kept]]
    assert got[kept:] == [None] * (12 - kept)


def test_the_check_ends_the_batch_at_the_first_bad_answer() -> None:
    """``check`` judges each body as it arrives: what it raises ends the batch there, and the
    answers after it are not waited for (nor held)."""
    judged: list[int] = []

    def check(i: int, body: bytes, fields: object) -> None:
        judged.append(i)
        if body != body_of(f"/base/{PATHS[i]}"):
            raise ValueError(f"bad answer {i}")

    def answer(conn: int, n: int, path: str) -> bytes:
        if path.endswith(PATHS[30]):
            return ok(b"not the file")
        if n > 30:
            time.sleep(0.5)  # a slow rest: not waited for
        return ok(body_of(path))

    with scripted(answer) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="bad answer 30"):
            client(url, connections=1).get_many(PATHS[:200], 1 << 20, check=check)
        assert time.monotonic() - t0 < 30  # the slow rest alone would take 84 s
    assert judged == list(range(31))


def test_an_answer_the_check_hands_back_switches_pipelining_off() -> None:
    """``HandBack`` from the check (an answer that does not fit its request): that path and
    every one not answered yet are None, and the client stops pipelining until reset."""

    def check(i: int, body: bytes, fields: object) -> None:
        if i == 6:
            raise HandBack

    with scripted(lambda conn, n, path: ok(body_of(path))) as (url, _):
        pipe = client(url, connections=1, depth=4)
        got = pipe.get_many(PATHS[:20], 1 << 20, check=check)
    assert got[:6] == [body_of(f"/base/{p}") for p in PATHS[:6]]
    assert got[6:] == [None] * 14 and not pipe.on


def test_an_announced_length_over_the_limit_is_refused() -> None:
    def answer(conn: int, n: int, path: str) -> bytes:
        if path.endswith(PATHS[2]):
            return b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000
        return ok(body_of(path))

    with scripted(answer) as (url, _), pytest.raises(CannotCheck, match="over the 4096-byte"):
        client(url).get_many(PATHS[:5], 4096)


def test_a_server_that_trickles_is_cut_off_at_the_request_timeout() -> None:
    """Part of a head, then nothing for longer than the request timeout (the connection's other
    answers wait behind it): refused at the timeout, not when the server is done."""

    def answer(conn: int, n: int, path: str) -> bytes | None:
        if n == 1:
            return b"HTTP/1.1 200 OK\r\nContent-Le"
        if n == 2:
            time.sleep(20)
            return None
        return ok(body_of(path))

    with scripted(answer) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(CannotCheck, match="no complete answer in time"):
            client(url, request_timeout=1.0, connections=1).get_many(PATHS[:4], 1 << 20)
        assert time.monotonic() - t0 < 15  # the server would stall 20 s


def test_the_overall_deadline_holds() -> None:
    def answer(conn: int, n: int, path: str) -> bytes:
        time.sleep(0.05)
        return ok(body_of(path))

    with scripted(answer) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(CannotCheck, match="no complete answer in time"):
            client(url, connections=1).get_many(PATHS, 1 << 20, deadline=time.monotonic() + 0.5)
        assert time.monotonic() - t0 < 20  # all 700 answers would take 35 s


def test_no_server_is_pipelining_off_not_an_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pipe = client(f"http://127.0.0.1:{port}")  # nothing listens there
    assert pipe.get_many(PATHS[:3], 100) == [None, None, None]
    assert not pipe.on  # the one-request client then says it cannot connect


def test_tls_is_left_to_the_one_request_client() -> None:
    pipe = client("https://127.0.0.1:1/")
    assert pipe.get_many(PATHS[:2], 100) == [None, None] and pipe.requests == 0
    pipe.reset()
    assert not pipe.on


@pytest.mark.parametrize("url", ["http://bücher.example/log", "http://127.0.0.1:1/a b",
                                 "http://127.0.0.1:1/\u00e9"])
def test_a_host_or_path_that_is_not_plain_ascii_is_left_to_the_one_request_client(
    url: str,
) -> None:
    pipe = client(url)
    assert not pipe.usable and pipe.get_many(PATHS[:2], 100) == [None, None]
