"""The whole hostile-peer campaign (issue 9): every HTTP client of the ledger against a hostile
server on 127.0.0.1 (``tests/helpers/hostile.py``) for every misbehaviour and every request path
it makes. The suite runs one path per client (``tests/campaigns/test_hostile_peers.py``).

    .venv/bin/python scripts/hostile_campaign.py [--timeout 1.0] [--verbose]

Prints one line per case with ``--verbose``, then the table of docs/reliability.md; exits 1 when a
case was accepted, crashed, printed more than one line or wrote something it should not have.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger.http.server import make_app
from ledger.mirror import Mirror, Remote
from ledger.witness import Witness
from tests.helpers.hostile import (
    MODES,
    mirror_campaign,
    submit_campaign,
    table,
    witness_campaign,
)
from tests.helpers.server import BackgroundServer
from tests.ledger.http.test_server import seal_range
from tests.ledger.test_mirror import make_origin, node_key, vkey_of

MIRROR_PATHS = ("/checkpoint", "/tile/0/", "/tile/entries/", "/api/v1/blobs")
# what `ledger submit` requests of a log that answers with its proofs (the inclusion and
# consistency proofs and the signer's registration come in the submit answer since issue 13)
SUBMIT_PATHS = ("/checkpoint", "/api/v1/submit")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=1.0, help="client deadline per case (s)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = make_origin(root / "log", 40)
        with BackgroundServer(make_app(log.home, accept_submissions=True)) as srv:
            remote = Remote(srv.url)
            Mirror(root / "base", remote, vkey_of(log)).sync()
            remote.close()
            seal_range(log, node_key(log), 40, 60)
            out = mirror_campaign(srv.url, vkey_of(log), root / "base", root, MIRROR_PATHS,
                                  MODES, args.timeout)
            w = Witness.init(root / "w", "witness.example")
            w.add_log(vkey_of(log))
            out += witness_campaign(log.home, w.vkey, None, ("/",), MODES, args.timeout)
            out += submit_campaign(log.home, srv.url, node_key(log), SUBMIT_PATHS, MODES,
                                   args.timeout)
        log.close()
    if args.verbose:
        for o in out:
            print(f"{'ok ' if o.ok else 'BAD'} {o.client} {o.target} {o.mode}: {o.result} "
                  f"exit {o.exit_code} {o.seconds:.1f} s {o.message[:160]}")
    print(table(out))
    bad = [o for o in out if not o.ok]
    print(f"{len(out)} cases, {len(bad)} bad, {time.monotonic() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
