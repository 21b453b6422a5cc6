"""Benchmarks of the library (issue 31 "Speed"; docs/benchmarks.md "Library"), each figure beside
its peer measured in the same run, round by round:

1. ``Verifier.verify`` of a **cached** kernel (no log: the cached files hashed against the signed
   manifest, the receipt's signatures and proofs, the checkpoint memory, the policy), against
   checking **the same receipt's signatures and proofs alone** (``Receipt.from_bytes`` and
   ``verify.integrity.check_evidence`` without files). Target: within 2x.
2. a **first** ``Verifier.verify`` of ``NAME@VERSION`` over HTTP (``ServerLog`` on a real
   ``ledger serve`` on 127.0.0.1: the name lookup, the receipt, the files, a fresh checkpoint
   memory each round), against what a client must do at the least for the same kernel over the
   same server: fetch the entry's receipt and its files and check them (``check_evidence``).
   Target: within 1.5x.

Run: ``.venv/bin/python bench/bench_library.py [--repeat 7] [--entries 200]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from rounds import machine, mmm, per_round, timed_rounds  # noqa: E402

import ledger  # noqa: E402
from ledger.core.bundle import Bundle  # noqa: E402
from ledger.core.encoding import hex_encode  # noqa: E402
from ledger.core.note import parse_vkey  # noqa: E402
from ledger.core.receipt import Receipt  # noqa: E402
from ledger.keys import load_node_secret, new_node_key  # noqa: E402
from ledger.library.cache import unpack  # noqa: E402
from ledger.log import Log  # noqa: E402
from ledger.trust import CheckpointMemory  # noqa: E402
from verify.integrity import Evidence, check_evidence  # noqa: E402


def fields(name: str) -> dict[str, Any]:
    return {"kernel": {"name": name, "version": "1.0.0"}, "obligations": [],
            "checks": [{"id": "ptx.parse", "status": "passed", "detail": "bench", "tool": "",
                        "version": ""}]}


def make_ledger(root: Path, entries: int) -> tuple[Path, str, str]:
    """A ledger of ``entries`` kernels (the last is ``bench_kernel``): (home, vkey, digest)."""
    home = root / "home"
    log = Log.init(home, "bench.example/log")
    log.register(new_node_key(log.keydir, "node"))
    sk, _ = load_node_secret(log.keydir, "node")
    digest = ""
    for i in range(entries):
        d = root / "b" / str(i)
        d.mkdir(parents=True)
        (d / "contract.yaml").write_text(f"metadata:\n  version: '1.0.0'\n  n: {i}\n")
        (d / "k.ptx").write_bytes(b"// ptx\n" + bytes(64 << 10))  # 64 KiB of PTX
        (d / "p.lean").write_text("theorem t : 1 = 1 := rfl\n")
        (d / "s.fut").write_text("entry main (x: i32) = x\n")
        name = "bench_kernel" if i == entries - 1 else f"k{i}"
        b = Bundle.from_dir(d)
        log.seal(b, fields(name), sk)
        digest = hex_encode(b.digest)
    vkey = log.verifier.vkey
    log.close()
    return home, vkey, digest


def receipt_alone(data: bytes, vk: Any) -> None:
    rec = Receipt.from_bytes(data)
    ev = Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                  receipt_problem=rec.problem(vk.name), revoked=rec.revoked)
    checks, _ = check_evidence(ev, vk, None)
    assert [c.id for c in checks if c.status == "failed"] == ["integrity.manifest"], checks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--entries", type=int, default=200)
    args = ap.parse_args()
    from tests.helpers.server import BackgroundServer, make_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, vkey, digest = make_ledger(root, args.entries)
        vk = parse_vkey(vkey)
        policy = ledger.Policy(log=vk)
        cache = ledger.Cache(root / "cache")
        mem = CheckpointMemory(root / "mem")
        ledger.Verifier(policy, ledger.LocalLog(home), cache=cache, memory=mem).verify(digest)
        data, _ = unpack((root / "cache" / "kernels" / digest / "entry").read_bytes())
        offline = ledger.Verifier(policy, None, cache=cache, memory=mem)
        t1 = timed_rounds({"cached": lambda: offline.verify("bench_kernel@1.0.0"),
                           "receipt": lambda: receipt_alone(data, vk)}, args.repeat)
        with BackgroundServer(make_app(home)) as srv:
            n = [0]

            def first() -> None:
                n[0] += 1
                log = ledger.ServerLog(srv.url)
                try:
                    ledger.Verifier(policy, log, memory=CheckpointMemory(root / f"m{n[0]}")
                                    ).verify("bench_kernel@1.0.0")
                finally:
                    log.close()

            def least() -> None:
                with httpx.Client(base_url=srv.url) as c:
                    index = c.get(f"/api/v1/lookup/{digest}").json()["index"]
                    rec = Receipt.from_bytes(c.get(f"/api/v1/entries/{index}/receipt").content)
                    files = {p: c.get(f"/api/v1/bundles/{index}/files/{p}").content
                             for p in ("contract.yaml", "k.ptx", "p.lean", "s.fut")}
                ev = Evidence(rec.item, rec.checkpoint, rec.signer, rec.revocation, False,
                              receipt_problem=rec.problem(vk.name), revoked=rec.revoked)
                checks, _ = check_evidence(ev, vk, files)
                assert all(c.status == "passed" for c in checks), checks

            t2 = timed_rounds({"first": first, "least": least}, args.repeat)
    print(f"# bench_library: {machine()}; {args.entries} entries, {args.repeat} rounds")
    print(f"cached Verifier.verify:  {mmm([v * 1e3 for v in t1['cached']], '{:.2f}')} ms")
    print(f"receipt check alone:     {mmm([v * 1e3 for v in t1['receipt']], '{:.2f}')} ms")
    print(f"ratio (target <= 2):     {mmm(per_round(t1['cached'], t1['receipt']))}")
    print(f"first verify over HTTP:  {mmm([v * 1e3 for v in t2['first']], '{:.2f}')} ms")
    print(f"receipt+files over HTTP: {mmm([v * 1e3 for v in t2['least']], '{:.2f}')} ms")
    print(f"ratio (target <= 1.5):   {mmm(per_round(t2['first'], t2['least']))}")


if __name__ == "__main__":
    main()
