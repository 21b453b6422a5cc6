"""A sealing process for the crash and concurrency tests: seals COUNT fresh bundles into the ledger
at HOME, one transaction each (as ``ledger seal`` does), and prints ``done <index> <digest>``
after each commit returns, flushed, so a parent that kills it knows what was reported done. It
prints ``ready`` once the ledger is open and the key loaded, so a parent can time its kill from
there rather than from process start (start-up time varies with the machine's load).

usage: python -m tests.helpers.seal_worker HOME PREFIX COUNT
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ledger.core.bundle import Bundle
from ledger.keys import load_node_secret
from ledger.log import Log
from tests.helpers.ledgers import fake_fields, write_bundle


def main() -> None:
    home, prefix, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    log = Log.open(home)
    sk, _ = load_node_secret(log.keydir, "node")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            salt = f"{prefix}-{i}"
            bundle = Bundle.from_dir(write_bundle(Path(tmp), salt, salt))
            sealed = log.seal(bundle, fake_fields(salt), sk)
            sys.stdout.write(f"done {sealed.index} {bundle.digest.hex()}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
