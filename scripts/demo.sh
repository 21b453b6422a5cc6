#!/usr/bin/env bash
# The main job on a fresh machine: set up, then seal and verify every example bundle in an
# embedded ledger (./demo-ledger, created anew), and audit it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LEDGER_HOME="$PWD/demo-ledger"
rm -rf "$LEDGER_HOME"
L=.venv/bin/ledger
$L init --origin demo.kernel-ledger.example/log
$L keys new demo-node
$L keys register demo-node
$L seal bundles/*/
for b in bundles/*/; do
  digest=$(.venv/bin/python -c "import sys; from ledger.core.bundle import Bundle; print(Bundle.from_dir(sys.argv[1]).digest.hex())" "$b")
  echo "== ledger verify $digest  ($b)"
  $L verify "$digest"
  echo "== offline: ledger verify $digest --receipt ${b}ledger-receipt.json"
  $L verify "$digest" --receipt "${b}ledger-receipt.json" --json \
    | .venv/bin/python -c "import json,sys; r=json.load(sys.stdin); print('offline verdict:', r['verdict'])"
done
$L log
$L audit
$L checkpoint
