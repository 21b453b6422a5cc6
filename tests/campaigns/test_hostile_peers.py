"""The hostile-peer campaign (issue 9), the slice that runs in the suite: every client of the
ledger (``mirror``, ``witness add-checkpoint``, ``submit``) against a real hostile server on
127.0.0.1 for every misbehaviour of ``tests.helpers.hostile.MODES`` (trickle, endless body, wrong
and huge Content-Length, truncated body, wrong content types, redirects to another host and in a
loop, HTML pages, garbage, a stalled answer, a closed connection). Each must end in one clear line
with exit 1 or 3, within its deadline, writing nothing. The whole campaign (every target path) is
``.venv/bin/python scripts/hostile_campaign.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.http.server import make_app
from ledger.http.witness import make_witness_app
from ledger.log import Log
from ledger.mirror import Mirror, Remote
from ledger.witness import Witness
from tests.helpers.hostile import (
    MODES,
    HostileServer,
    Outcome,
    mirror_campaign,
    submit_campaign,
    table,
    witness_campaign,
)
from tests.helpers.ledgers import assert_one_error_line, run_cli
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range
from tests.ledger.test_mirror import make_origin, node_key, vkey_of


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Log, BackgroundServer, Path]]:
    """A log of 41 entries mirrored, then grown to 61: a sync needs every kind of request."""
    root = tmp_path_factory.mktemp("hostile")
    log = make_origin(root / "log", 40)
    with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
        remote = Remote(srv.url)
        Mirror(root / "base", remote, vkey_of(log)).sync()
        remote.close()
        seal_range(log, node_key(log), 40, 60)
        yield log, srv, root
    log.close()


def check(outcomes: list[Outcome]) -> None:
    bad = [o for o in outcomes if not o.ok]
    assert not bad, "\n".join(f"{o.client} {o.target} {o.mode}: {o.result} {o.exit_code} "
                              f"{o.message[:300]!r} wrote_nothing={o.wrote_nothing}" for o in bad)
    assert all(o.seconds < 10 for o in outcomes)  # deadline 0.5 s; main waited up to 30 s


def test_mirror_against_hostile_tiles(world: tuple[Log, BackgroundServer, Path]) -> None:
    log, srv, root = world
    out = mirror_campaign(srv.url, vkey_of(log), root / "base", root, ("/tile/",), MODES, 0.5)
    check(out)
    assert sum(o.result == "refused" for o in out) == len(MODES)


def test_witness_client_against_hostile_witness(
    world: tuple[Log, BackgroundServer, Path],
) -> None:
    log, _, root = world
    w = Witness.init(root / "w", "witness.example")
    w.add_log(vkey_of(log))
    out = witness_campaign(log.home, w.vkey, None, ("/",), MODES, 0.5)
    check(out)
    assert sum(o.result == "refused" for o in out) == len(MODES)
    with BackgroundServer(make_witness_app(root / "w")) as ws:  # a real witness still works
        from ledger.witness import request_cosignature

        assert request_cosignature(log.home, ws.url, w.vkey, timeout=30)


def test_submit_against_hostile_log_server(world: tuple[Log, BackgroundServer, Path]) -> None:
    log, srv, _ = world
    modes = ("trickle_body", "endless", "huge_length", "short_body", "html_200",
             "redirect_other", "garbage", "stall")  # the rest: scripts/hostile_campaign.py
    out = submit_campaign(log.home, srv.url, node_key(log), ("/api/v1/submit",), modes, 0.4)
    check(out)
    assert sum(o.result == "refused" for o in out) == len(modes)
    print(table(out))


def test_cli_exit_codes_against_a_hostile_witness(
    world: tuple[Log, BackgroundServer, Path],
) -> None:
    """End to end through the real command: one line on stderr, exit 3 for an unusable answer,
    exit 1 for a complete answer that is not a cosignature; nothing stored either way."""
    log, _, root = world
    w = Witness.init(root / "w2", "witness2.example")
    for mode, code in (("html_503", 3), ("garbage", 1)):
        with HostileServer(mode, ("/",)) as hs:
            res = run_cli("witness", "add-checkpoint", hs.url, "--vkey", w.vkey, "--timeout", "1",
                          home=log.home)
        assert_one_error_line(res, code)
        assert res.stdout == ""
