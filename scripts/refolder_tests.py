"""One-shot: fold the flat tests/ into tests/<package>/test_<module>.py and tests/campaigns/ (issue
30).

Kept in the repository for the record of which old file went where (a reader of an old commit
message or docs/benchmarks.md finds the new path here). Run from the repository root; it prints
every move and rewrites paths and imports that pointed at the old places.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# exact old name -> new path under tests/
EXACT = {
    # campaigns: named by what they attack
    "test_redteam_byo.py": "campaigns/test_own_kernels_round1.py",
    "test_redteam_byo2.py": "campaigns/test_own_kernels_round2.py",
    "test_redteam_byo3.py": "campaigns/test_own_kernels_round3.py",
    "test_redteam_byo4.py": "campaigns/test_own_kernels_round4.py",
    "test_redteam_dos.py": "campaigns/test_resource_exhaustion.py",
    "test_redteam_lean.py": "campaigns/test_lean_escapes.py",
    "test_redteam_net.py": "campaigns/test_network_attacks.py",
    "test_redteam_postgres.py": "campaigns/test_postgres_tampering.py",
    "test_redteam_secrets.py": "campaigns/test_secrets_at_rest.py",
    "test_redteam_store.py": "campaigns/test_stored_log_tampering.py",
    "test_redteam_witness.py": "campaigns/test_witness_attacks.py",
    "test_hardening_campaign.py": "campaigns/test_fault_campaign.py",
    "test_hardening_entries.py": "campaigns/test_hostile_entries.py",
    "test_hardening_net_hostile.py": "campaigns/test_hostile_peers.py",
    "test_hardening_net_mirror.py": "campaigns/test_hostile_origin_for_mirror.py",
    "test_hardening_net_server.py": "campaigns/test_hostile_clients_of_server.py",
    "test_hardening_net_submit.py": "campaigns/test_hostile_submissions.py",
    "test_hardening_seal.py": "campaigns/test_seal_faults.py",
    "test_hardening_store.py": "campaigns/test_store_faults.py",
    "test_hardening_verify.py": "campaigns/test_hostile_bundles_for_verify.py",
    "test_hardening_witness.py": "campaigns/test_hostile_witness_peers.py",
    "test_reliability.py": "campaigns/test_reliability.py",
    "test_tamper.py": "campaigns/test_tampering.py",
    "test_ptx_mutation.py": "campaigns/test_ptx_mutations.py",
    "test_kernels_planted.py": "campaigns/test_planted_bugs.py",
    "test_ptxsim_blind.py": "campaigns/test_blind_kernels.py",
    # ledger.core
    "test_canonical.py": "ledger/core/test_canonical.py",
    "test_merkle.py": "ledger/core/test_merkle.py",
    "test_note.py": "ledger/core/test_note.py",
    "test_tiles.py": "ledger/core/test_tiles.py",
    "test_native.py": "ledger/core/test_native.py",
    "test_sanitize_native.py": "ledger/core/test_native_sanitized.py",
    "test_vectors_blake3.py": "ledger/core/test_bundle_blake3_vectors.py",
    "test_hashlevels.py": "ledger/core/test_hashlevels.py",
    "test_gcpause.py": "ledger/core/test_gcpause.py",
    # ledger.store
    "test_store.py": "ledger/store/test_sqlite.py",
    "test_store_parts.py": "ledger/store/test_sqlite_parts.py",
    "test_postgres.py": "ledger/store/test_postgres.py",
    "test_walcheckpoint.py": "ledger/store/test_walcheckpoint.py",
    "test_fuzz_ledger.py": "ledger/store/test_fuzz_ledger.py",
    # ledger.net
    "test_pipeline.py": "ledger/net/test_pipeline.py",
    # ledger.http
    "test_server.py": "ledger/http/test_server.py",
    "test_server_fast.py": "ledger/http/test_server_fast.py",
    "test_server_openapi.py": "ledger/http/test_openapi.py",
    "test_web_feed.py": "ledger/http/web/test_feed.py",
    "test_web_pages.py": "ledger/http/web/test_pages.py",
    "test_browser.py": "ledger/http/web/test_browser.py",
    # ledger use cases
    "test_mirror.py": "ledger/test_mirror.py",
    "test_publish.py": "ledger/test_publish.py",
    "test_submit.py": "ledger/test_submit.py",
    "test_submit_batch.py": "ledger/test_submit_batch.py",
    "test_trust.py": "ledger/test_trust.py",
    "test_witness.py": "ledger/test_witness.py",
    "test_witness_conformance.py": "ledger/test_witness_conformance.py",
    "test_witness_seal.py": "ledger/test_witness_seal.py",
    "test_sealers.py": "ledger/test_sealers.py",
    # the shell
    "test_cli.py": "ledger_cli/test_commands.py",
    "test_cli_columns.py": "ledger_cli/test_output_columns.py",
    "test_cli_progress.py": "ledger_cli/test_output_progress.py",
    "test_cli_quickverify.py": "ledger_cli/test_quickverify.py",
    "test_cli_shell.py": "ledger_cli/test_shell.py",
    "test_bad_input.py": "ledger_cli/test_bad_input.py",
    "test_kernels_new.py": "ledger_cli/test_scaffold.py",
    "test_seal_your_own.py": "docs/test_seal_your_own_guide.py",
    "test_startup.py": "ledger_cli/test_startup.py",
    # verify
    "test_certificate.py": "verify/test_certificate.py",
    "test_bundle_reference.py": "verify/test_references.py",
    "test_futhark.py": "verify/test_futhark.py",
    "test_futhark_oracle.py": "verify/test_futhark_oracle.py",
    "test_rebuild.py": "verify/test_rebuild.py",
    "test_sandbox.py": "verify/test_sandbox.py",
    "test_sizes.py": "verify/test_sizes.py",
    "test_tools.py": "verify/test_tools.py",
    "test_ptx_check.py": "verify/test_ptx.py",
    "test_contract_corpus.py": "verify/test_contract_corpus.py",
    "test_contract_fuzz.py": "verify/test_contract_fuzz.py",
    "test_contract_lint.py": "verify/test_contract_lint.py",
    "test_contract_load.py": "verify/test_contract.py",
    "test_falsify_bundles.py": "verify/test_falsify_bundles.py",
    "test_falsify_compare.py": "verify/test_compare.py",
    "test_falsify_device_check.py": "verify/test_device_check.py",
    "test_falsify_engine.py": "verify/test_falsify.py",
    "test_lean_fuzz.py": "verify/lean/test_scan_fuzz.py",
    "test_lean_kernel.py": "verify/lean/test_kernel.py",
    "test_lean_lexer.py": "verify/lean/test_lexer.py",
    "test_lean_scan.py": "verify/lean/test_scan.py",
    "test_ptxsim_bundles.py": "verify/ptxsim/test_bundles.py",
    "test_ptxsim_features.py": "verify/ptxsim/test_features.py",
    "test_ptxsim_fixtures.py": "verify/ptxsim/test_fixtures.py",
    "test_ptxsim_handoff.py": "verify/ptxsim/test_handoff.py",
    "test_ptxsim_isa_more.py": "verify/ptxsim/test_isa_more.py",
    "test_ptxsim_kernels.py": "verify/ptxsim/test_kernels.py",
    "test_ptxsim_semantics.py": "verify/ptxsim/test_semantics.py",
    "test_ptxsim_shared.py": "verify/ptxsim/test_shared.py",
    "test_ptxsim_warp.py": "verify/ptxsim/test_warp.py",
    # the example kernels end to end
    "test_kernels.py": "kernels/test_examples.py",
    "test_kernels_falsify.py": "kernels/test_examples_falsify.py",
    "test_kernels_references.py": "kernels/test_examples_references.py",
    # project-wide rules stay at the top
    "test_layering.py": "test_layering.py",
    "test_wheel.py": "test_wheel.py",
    # added in the same round by the parallel branches
    "test_canonical_jcs.py": "ledger/core/test_canonical_jcs.py",
    "test_cosign.py": "ledger/test_cosign.py",
    "test_cosigned.py": "ledger/core/test_cosigned.py",
    "test_cuda_extra.py": "scripts/test_cuda_extra.py",
    "test_dependencies.py": "test_dependencies.py",
    "test_entries.py": "ledger/core/test_entries.py",
    "test_futhark_data.py": "verify/test_futhark_data.py",
    "test_guard.py": "ledger/http/test_guard.py",
    "test_onboard.py": "ledger/test_onboard.py",
    "test_onboarding_guide.py": "docs/test_onboarding_guide.py",
    "test_pgdriver.py": "ledger/store/test_pgdriver.py",
    "test_public_apis.py": "test_public_apis.py",
    "test_revoked.py": "ledger/core/test_revoked.py",
    "test_scaffold.py": "ledger_cli/test_scaffold_types.py",
    "test_setup.py": "scripts/test_setup.py",
    "test_text.py": "ledger/core/test_text.py",
    "test_vkeyfile.py": "ledger/core/test_vkeyfile.py",
    "test_waivers.py": "verify/test_waivers.py",
    "test_attest.py": "ledger/test_attest.py",
    "test_author_loop.py": "ledger_cli/test_author_loop.py",
    "test_triton.py": "ledger_cli/test_triton.py",
    "test_kernels_triton.py": "kernels/test_examples_triton.py",
    "test_search.py": "ledger/test_search.py",
}
# new files by prefix, for what the parallel branches add
PREFIX = [
    ("test_campaign_", "campaigns/test_"),
    ("test_ptxsim_", "verify/ptxsim/test_"),
    ("test_lean_", "verify/lean/test_"),
    ("test_contract_", "verify/test_contract_"),
    ("test_falsify_", "verify/test_falsify_"),
    ("test_library_", "ledger/test_library_"),
    ("test_cli_", "ledger_cli/test_"),
    ("test_store_", "ledger/store/test_"),
    ("test_server_", "ledger/http/test_server_"),
    ("test_web_", "ledger/http/web/test_"),
]


def target(name: str) -> str | None:
    if name in EXACT:
        return EXACT[name]
    for old, new in PREFIX:
        if name.startswith(old):
            return new + name[len(old):]
    return None


def fix_paths(text: str, depth: int) -> str:
    """``Path(__file__)``-relative paths of a file that moved ``depth`` folders below tests/."""
    if depth == 0:
        return text
    tests = f"Path(__file__).resolve().parents[{depth}]"
    root = f"Path(__file__).resolve().parents[{depth + 1}]"
    text = re.sub(r"Path\(__file__\)(?:\.resolve\(\))?\.parent\.parent\b", root, text)
    text = re.sub(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[1\]", root, text)
    text = re.sub(r"Path\(__file__\)(?:\.resolve\(\))?\.parent\b(?!\.)", tests, text)
    return text


def main() -> int:
    tests = ROOT / "tests"
    moves: dict[str, str] = {}
    unknown = []
    for path in sorted(tests.glob("test_*.py")):
        new = target(path.name)
        if new is None:
            unknown.append(path.name)
        elif new != path.name:
            moves[path.name] = new
    if unknown:
        print("no place for:", ", ".join(unknown), file=sys.stderr)
        return 1
    for old, new in moves.items():
        dest = tests / new
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", str(tests / old), str(dest)], cwd=ROOT, check=True)
        depth = len(Path(new).parts) - 1  # folders between tests/ and the file
        dest.write_text(fix_paths(dest.read_text(encoding="utf-8"), depth), encoding="utf-8")
        print(f"tests/{old} -> tests/{new}")
    # imports of one test module by another, and paths in docs, scripts, bench and tests
    mod = {f"tests.{o[:-3]}": "tests." + n[:-3].replace("/", ".") for o, n in moves.items()}
    pth = {f"tests/{o}": f"tests/{n}" for o, n in moves.items()}
    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.sh", "*.toml", "*.yaml"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        p = ROOT / rel
        if not p.is_file() or rel == "scripts/refolder_tests.py":
            continue
        text = p.read_text(encoding="utf-8")
        new_text = re.sub(r"\btests\.test_\w+\b", lambda m: mod.get(m.group(0), m.group(0)), text)
        new_text = re.sub(r"\btests/test_\w+\.py\b",
                          lambda m: pth.get(m.group(0), m.group(0)), new_text)
        if new_text != text:
            p.write_text(new_text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
