"""``ledger log`` (issue 34): which entries it lists (a range, or every entry of the kernels a
``--kernel`` query matches, through the whole-log index ``ledger.search``) and the table it
prints: index, kernel (or key), verdict, signer, time, digest and leaf hash, the last columns
dropped first when the terminal is narrow, and no value ever folded mid-token (a value that still
does not fit is cut with an ellipsis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.core.encoding import hex_encode
from ledger.core.entries import decode_stored
from ledger.search import Index, row_of
from ledger.store import Store

HASH_CHARS = 16  # hex digits of a digest or leaf hash the table shows
# (heading, item key, priority): the columns, the lowest priority dropped first when too wide
COLUMNS = (
    ("index", "index", 0), ("kernel / key", "what", 1), ("verdict", "verdict_shown", 2),
    ("signer", "signer_shown", 3), ("time", "time", 4), ("bundle digest", "digest_short", 5),
    ("leaf hash", "leaf_short", 6),
)
MIN_WHAT = 12  # columns the kernel column keeps before later columns are dropped for it


def _item(index: int, leaf: bytes, data: bytes, names: dict[str, str]) -> dict[str, Any]:
    decode_stored(index, data)  # an entry that no longer decodes is an error, as before
    r = row_of(index, data)
    lh = hex_encode(leaf)
    signer = r.signer if r.type == "bundle" else ""
    what = f"{r.name} {r.version}".strip() if r.type == "bundle" else (r.name or r.signer)
    return {
        "index": index, "leaf_hash": lh, "type": r.type, "time": r.time,
        "bundle_digest": r.digest or None,
        # one shape of "kernel" everywhere (issue 31): {"name", "version"} or null
        "kernel": {"name": r.name, "version": r.version} if r.type == "bundle" else None,
        "key": (r.name or r.signer) or None if r.type != "bundle" else None,  # a key entry's key
        "signer": signer or None, "verdict": r.verdict or None,
        "signer_name": names.get(signer) if signer else None,
        # for the table only
        "what": what, "verdict_shown": r.verdict,
        "signer_shown": names.get(r.signer, r.signer[:HASH_CHARS]),
        "digest_short": r.digest[:HASH_CHARS], "leaf_short": lh[:HASH_CHARS],
    }


def key_names(store: Store) -> dict[str, str]:
    return {hex_encode(k.key_id): k.name for k in store.key_rows()}


def range_items(store: Store, first: int, limit: int) -> list[dict[str, Any]]:
    """Entries ``first .. first+limit-1``."""
    names = key_names(store)
    out = []
    for i, lh, data in store.rows(first):
        if i >= first + limit:
            break
        out.append(_item(i, lh, data, names))
    return out


def kernel_items(store: Store, size: int, query: str, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` bundle entries whose kernel name matches ``query`` (prefix, part or
    ``*`` wildcard, any case: ``ledger.search.Index.names``), oldest first."""
    index = Index()
    index.refresh(store, size)
    found = [i for i in index.by_names(index.names(query))
             if index.rows[i].type == "bundle"][:limit]
    names = key_names(store)
    return [_item(i, store.leaf_hash(i), store.entry(i), names) for i in sorted(found)]


TABLE_ONLY = ("what", "verdict_shown", "signer_shown", "digest_short", "leaf_short")


def json_items(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``--json`` prints of each item: everything but the table's shortened copies."""
    return [{k: v for k, v in i.items() if k not in TABLE_ONLY} for i in items]


def _width(items: Sequence[dict[str, Any]], heading: str, key: str) -> int:
    return max([len(heading), *(len(str(i[key])) for i in items)])


def fit_columns(items: Sequence[dict[str, Any]], width: int) -> list[tuple[str, str]]:
    """The columns that fit ``width`` (a rich table with a border: 3 per column and 1), the
    lowest priority dropped first; the kernel column counted at ``MIN_WHAT`` at most, since it
    may be cut with an ellipsis."""
    cols = list(COLUMNS)

    def need(c: tuple[str, str, int]) -> int:
        w = _width(items, c[0], c[1])
        return min(w, MIN_WHAT) if c[1] == "what" else w

    while len(cols) > 2 and sum(need(c) + 3 for c in cols) + 1 > width:
        cols.remove(max(cols, key=lambda c: c[2]))
    return [(c[0], c[1]) for c in cols]


def print_table(title: str, items: Sequence[dict[str, Any]]) -> None:
    from rich.table import Table

    from ledger_cli import output

    out = output.out
    table = Table(title=output.esc(title), title_justify="left")
    columns = fit_columns(items, out.width)
    for heading, key in columns:
        # only the kernel column may wrap (at its spaces) or be cut with an ellipsis: rich
        # narrows it before any other
        table.add_column(heading, no_wrap=key != "what", overflow="ellipsis",
                         min_width=MIN_WHAT if key == "what" else None)
    for i in items:
        row = []
        for _, key in columns:
            text = output.esc(i[key])
            style = output.VERDICT_STYLE.get(str(i[key]), "") if key == "verdict_shown" else ""
            row.append(f"[{style}]{text}[/]" if style else text)
        table.add_row(*row)
    out.print(table)
