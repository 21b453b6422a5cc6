"""The auditor's whole-log index (``ledger.search``, issue 34): kernel name prefix, part and
wildcard, signer, digest prefix and index, any case; built from a real SQLite ledger and brought
up to date incrementally (only entries appended since are read); no window of newest entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.core.bundle import Bundle
from ledger.core.errors import BadInput
from ledger.log import Log
from ledger.search import Index, Row, parse_ref, verdict_of
from tests.helpers.ledgers import add_node, fake_fields, new_ledger, write_bundle


def seal(log: Log, sk: Any, root: Path, name: str, version: str, status: str = "passed") -> int:
    fields = fake_fields(f"{name}{version}")
    fields["kernel"] = {"name": name, "version": version}
    fields["checks"][0]["status"] = status
    d = write_bundle(root, f"{name}-{version}", f"{name}{version}")
    return log.seal(Bundle.from_dir(d), fields, sk).index


@pytest.fixture()
def ledger(tmp_path: Path) -> tuple[Log, dict[str, int]]:
    log = new_ledger(tmp_path / "home")
    alice, bob = add_node(log, "alice"), add_node(log, "Bob")
    at = {
        "GEMM_f16": seal(log, alice, tmp_path, "GEMM_f16", "1.0.0"),
        "gemm_f32": seal(log, bob, tmp_path, "gemm_f32", "2.0", "skipped"),
        "sgemm": seal(log, alice, tmp_path, "sgemm", "0.1", "failed"),
        "vector_add": seal(log, bob, tmp_path, "vector_add", "1.0.0"),
    }
    return log, at


def names_of(log: Log) -> dict[str, str]:
    return {k.key_id.hex(): k.name for k in log.store.key_rows()}


def found(index: Index, q: str, log: Log) -> list[str]:
    return [r.name for r in index.search(q, names_of(log))]


def test_name_prefix_substring_wildcard_any_case(ledger: tuple[Log, dict[str, int]]) -> None:
    log, _ = ledger
    index = Index()
    index.refresh(log.store, log.store.size())
    # newest first; "gemm" is a prefix of gemm_f32 and GEMM_f16 and inside sgemm
    assert found(index, "gemm", log) == ["sgemm", "gemm_f32", "GEMM_f16"]
    assert found(index, "GEMM", log) == found(index, "gemm", log)
    assert found(index, "VEC", log) == ["vector_add"]
    assert found(index, "_add", log) == ["vector_add"]
    assert found(index, "gemm_*", log) == ["gemm_f32", "GEMM_f16"]
    assert found(index, "*16", log) == ["GEMM_f16"]
    assert index.names("em") == ["gemm_f16", "gemm_f32", "sgemm"]  # all inside, none a prefix
    assert found(index, "nothing-like-it", log) == []


def test_signer_digest_prefix_and_index(ledger: tuple[Log, dict[str, int]]) -> None:
    log, at = ledger
    index = Index()
    index.refresh(log.store, log.store.size())
    names = names_of(log)
    bob = next(k for k, n in names.items() if n == "Bob")
    # a signer by name (any case) or key id prefix: its bundles and its own registration
    by_bob = [r.index for r in index.search("bob", names)]
    assert by_bob == [at["vector_add"], at["gemm_f32"], 1]
    assert [r.index for r in index.search(bob[:6].upper(), names)] == by_bob
    row = index.rows[at["sgemm"]]
    assert row.verdict == "failed" and row.signer != bob and row.ref == "sgemm@0.1"
    assert [r.index for r in index.search(row.digest[:6], names)] == [at["sgemm"]]
    assert index.by_digest_prefix(row.digest[:3]) == []  # too short to be a digest prefix
    assert [r.index for r in index.search(str(at["sgemm"]), names)] == [at["sgemm"]]
    assert [r.verdict for r in index.by_ref("GEMM_F32", "2.0")] == ["partial"]
    assert index.by_ref("gemm_f32", "9") == []


def test_refresh_reads_only_new_entries(ledger: tuple[Log, dict[str, int]],
                                        tmp_path: Path) -> None:
    log, _ = ledger
    index = Index()
    index.refresh(log.store, log.store.size())
    first = index.size
    read: list[int] = []

    class Counting:
        def __init__(self, store: Any) -> None:
            self.store = store

        def rows(self, start: int = 0) -> Any:
            for i, lh, data in self.store.rows(start):
                read.append(i)
                yield i, lh, data

    sk = add_node(log, "carol")
    new = seal(log, sk, tmp_path, "gemm_tc", "1")
    index.refresh(Counting(log.store), log.store.size())
    assert read == list(range(first, new + 1))  # never the entries indexed before
    assert found(index, "gemm_t", log) == ["gemm_tc"]
    index.refresh(Counting(log.store), log.store.size())
    assert read == list(range(first, new + 1))  # nothing new: nothing read


def test_no_window_of_newest_entries() -> None:
    """The oldest entry of a 20,000-entry index is found as readily as the newest (the pages
    used to scan only the newest 5,000)."""
    index = Index()
    for i in range(20_000):
        name = "oldest_kernel" if i == 0 else f"k{i % 50}"
        index.add(Row(i, "bundle", name, "1", "ab" * 8, f"{i:064x}", "", "verified"))
    assert [r.index for r in index.search("OLDEST", {})] == [0]
    assert len(index.search("k1", {}, limit=10_000)) == 11 * 400  # k1, k10..k19
    with pytest.raises(ValueError):
        index.add(Row(5, "bundle", "x", "1", "", "", "", ""))


def test_verdict_and_refs() -> None:
    assert verdict_of({"type": "bundle", "checks": [{"status": "passed"}]}) == "verified"
    assert verdict_of({"type": "bundle", "checks": [{"status": "skipped"}]}) == "partial"
    assert verdict_of({"type": "bundle", "checks": []}) == "failed"
    assert verdict_of({"type": "key-registration"}) == ""
    assert parse_ref("gemm@1.0") == ("gemm", "1.0") and parse_ref("gemm") == ("gemm", None)
    for bad in ("@1", "gemm@", ""):
        with pytest.raises(BadInput):
            parse_ref(bad)
