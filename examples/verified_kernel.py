"""Launch a kernel only if the ledger vouches for it under your team's rules.

    python examples/verified_kernel.py --log /srv/ledger --policy policy.json vector_add@1.0.0

1. read the trust policy (the same file ``ledger verify --policy`` reads);
2. verify the kernel by NAME@VERSION against the log (a ledger directory, a ``ledger serve`` URL
   or a static mirror) and load its PTX only once that succeeded (``ledger.load_ptx``; the
   verified cache makes the next run work offline);
3. with CuPy and a GPU, build the module from exactly those bytes (``ledger.load_cupy``).

Exit codes as the ``ledger`` command's: 0 loaded, 1 refused (tampering or the policy not met), 2
bad input, 3 could not check.
"""

from __future__ import annotations

import argparse
import sys

import ledger


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ref", help="the kernel: NAME@VERSION, a digest, a bundle directory")
    p.add_argument("--log", help="ledger directory, server URL or static mirror")
    p.add_argument("--policy", help="trust policy file (default: $LEDGER_POLICY)")
    p.add_argument("--lock", help="refuse kernels not in this lock file")
    p.add_argument("--cupy", action="store_true", help="also build a CuPy RawModule")
    args = p.parse_args(argv)
    try:
        policy = ledger.load_policy(args.policy)
        ptx, cert = ledger.load_ptx(args.ref, policy, log=args.log, lock=args.lock)
        print(f"{cert.kernel} {cert.bundle_digest}: {cert.verdict}, sealed by {cert.signer.name} "
              f"(entry {cert.index}, tree size {cert.tree_size})")
        if cert.partial:
            print(cert.partial)
        print(f"PTX: {len(ptx)} bytes")
        if args.cupy:
            module, _ = ledger.load_cupy(args.ref, policy, log=args.log, lock=args.lock)
            print(f"CuPy module: {module!r}")
    except ledger.PolicyError as e:
        print(f"refused by the policy ({e.rule}): {e.reason}", file=sys.stderr)
        return e.exit_code
    except ledger.LedgerError as e:
        print(f"refused: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
