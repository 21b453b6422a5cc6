"""Suite-wide isolation: the verifier's checkpoint memory (issue 14) and the user's trust policy
live under the user's cache and config directories; the tests use a private pair instead, so a
developer's own ~/.cache/kernel-ledger and ~/.config/kernel-ledger are neither read nor written.

Hypothesis runs without its per-example deadline and too-slow health check: those are wall-clock
time boxes, and a unit test's verdict must not depend on the machine's load."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("suite")


@pytest.fixture(scope="session", autouse=True)
def _private_cache_and_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("user-dirs")
    saved = {k: os.environ.get(k) for k in ("LEDGER_CACHE_DIR", "XDG_CONFIG_HOME", "LEDGER_POLICY")}
    os.environ["LEDGER_CACHE_DIR"] = str(root / "cache")
    os.environ["XDG_CONFIG_HOME"] = str(root / "config")
    os.environ.pop("LEDGER_POLICY", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# Long campaigns (issue 30: the suite stays under 8 minutes on an idle 2-core machine): every
# attack campaign in tests/campaigns/ (the red-team rounds, fault and crash loops, the
# bring-your-own kernel rounds, the real-kernel corpus), the fuzzers, and the long end-to-end
# sweeps: the guides followed step by step (tests/docs/), the web pages in a real browser, every
# command at 80 columns; and the long tail of each sweep below (SWEEPS). A crash loop inside a
# unit file carries ``@pytest.mark.campaign`` itself.
# They are marked ``campaign`` here, in one place, and run by ``scripts/campaigns.sh``
# (``pytest -m campaign``) beside the suite, which ``scripts/test.sh`` runs with
# ``-m "not campaign"``. Files are named by their path below tests/, folders end in "/".
CAMPAIGN_FOLDERS = ("campaigns/", "docs/")
CAMPAIGNS = frozenset({
    "verify/test_contract_fuzz.py",
    "verify/lean/test_scan_fuzz.py",
    "ledger/store/test_fuzz_ledger.py",
    "ledger/http/web/test_browser.py",
    "ledger_cli/test_output_columns.py",
})
TESTS = Path(__file__).resolve().parent


def is_campaign(path: Path) -> bool:
    """Whether the test file at ``path`` belongs to the long campaigns, not the suite."""
    rel = path.resolve().relative_to(TESTS).as_posix()
    return rel in CAMPAIGNS or rel.startswith(CAMPAIGN_FOLDERS)


# Sweeps: a parametrized test over many hostile inputs or output variants keeps its first N cases
# in the suite (one of each kind the test guards) and runs the rest with the campaigns. Named as
# "path below tests/::function".
SWEEPS = {
    "ledger_cli/test_quickverify.py::test_a_run_prints_the_same_bytes_either_way": 6,
    "ledger/test_onboard.py::test_register_refuses_a_bad_export": 2,
    "ledger_cli/test_bad_input.py::test_bad_bundle_structure": 3,
    "ledger_cli/test_bad_input.py::test_hostile_contract_is_a_failed_check": 2,
    "ledger_cli/test_bad_input.py::test_bad_keys": 2,
    "ledger/http/test_openapi.py::test_operation_follows_its_description": 4,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seen: dict[str, int] = {}
    for item in items:
        if is_campaign(item.path):
            item.add_marker(pytest.mark.campaign)
            continue
        rel = item.path.resolve().relative_to(TESTS).as_posix()
        name = f"{rel}::{getattr(item, 'originalname', item.name)}"
        if name in SWEEPS:
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > SWEEPS[name]:
                item.add_marker(pytest.mark.campaign)
