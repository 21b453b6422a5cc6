#!/usr/bin/env bash
# Set up (scripts/setup.sh --test) and run lint, type checks, the bundle reproducibility check,
# the interpreter device check and the test suite with branch coverage (the long campaigns
# beside it: scripts/campaigns.sh).
# Fails when any test, ruff, mypy or the bundle check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check ledger verify tests bench scripts kernels/build.py
.venv/bin/mypy
.venv/bin/python kernels/build.py --check
mkdir -p artifacts
.venv/bin/python scripts/device_check.py --interpreter-only --out artifacts/device-check.md
# the tests, under branch coverage (CLI subprocesses included; config in pyproject.toml)
rm -f artifacts/.coverage*
# one pytest worker per core (pytest-xdist); a test file stays on one worker, so its module
# fixtures are built once. PYTEST_WORKERS=0 runs everything in this process.
# the long campaigns (tests/conftest.py CAMPAIGNS) run beside the suite: scripts/campaigns.sh
.venv/bin/python -m coverage run -m pytest -q -n "${PYTEST_WORKERS:-auto}" --dist loadfile \
  -m "not campaign" "$@"
.venv/bin/python -m coverage combine -q
.venv/bin/python -m coverage report > artifacts/coverage.txt
echo "branch coverage (ledger, verify; full table in artifacts/coverage.txt):"
tail -n 3 artifacts/coverage.txt
