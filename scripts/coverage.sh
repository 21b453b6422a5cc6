#!/usr/bin/env bash
# The test suite under branch coverage (ledger, ledger_cli, verify; the CLI subprocesses the
# tests start are measured too; config in pyproject.toml), the table in artifacts/coverage.txt.
# Beside scripts/test.sh, not in it: tracing makes the suite about 1.6x slower (issue 30).
# `--campaigns` measures the long campaigns too. Fails when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
marker="not campaign"
if [[ "${1:-}" == "--campaigns" ]]; then
  marker="campaign or not campaign"
  shift
fi
bash scripts/setup.sh --test
mkdir -p artifacts
rm -f artifacts/.coverage*
.venv/bin/python -m coverage run -m pytest -q -n "${PYTEST_WORKERS:-auto}" --dist loadfile \
  -m "$marker" "$@"
.venv/bin/python -m coverage combine -q
.venv/bin/python -m coverage report > artifacts/coverage.txt
echo "branch coverage (ledger, ledger_cli, verify; full table in artifacts/coverage.txt):"
tail -n 3 artifacts/coverage.txt
