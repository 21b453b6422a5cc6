#!/usr/bin/env bash
# Set up (scripts/setup.sh --test) and run lint, type checks, the interpreter device check and
# the test suite (the bundle reproducibility check, kernels/build.py --check, is one of its tests:
# tests/kernels/test_examples.py). Fails when any test, ruff or mypy fails. Beside it, not in it (issue 30: the suite stays under 8 minutes on an idle 2-core
# machine): the long campaigns, `bash scripts/campaigns.sh`, and the same suite under branch
# coverage, `bash scripts/coverage.sh` (tracing costs about 1.6x the suite's time).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check ledger ledger_cli verify tests bench scripts kernels/build.py
.venv/bin/mypy
mkdir -p artifacts
.venv/bin/python scripts/device_check.py --interpreter-only --out artifacts/device-check.md
# one pytest worker per core and one more (pytest-xdist): the tests wait on servers, subprocesses
# and PostgreSQL often enough that two workers left the 2 cores a quarter idle. A test file stays
# on one worker, so its module fixtures are built once. PYTEST_WORKERS=0 runs everything here.
# the long campaigns (tests/conftest.py is_campaign) run beside the suite: scripts/campaigns.sh
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-$(( $(nproc) + 1 ))}" --dist loadfile -m "not campaign" "$@"
