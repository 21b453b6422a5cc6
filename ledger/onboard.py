"""Onboarding a node (issue 34; docs/onboarding-a-node.md): what a new node sends the log's
operator, how the operator registers it, and what ``ledger submit`` says when it was not.

The node-key export file (``ledger keys export NAME [--out FILE]``) is JSON, at most
``MAX_EXPORT`` bytes, exactly these members (unknown ones are refused)::

    {"kind": "kernel-ledger/node-key-export/v1",
     "name": NAME, "key_id": <16 lowercase hex>,
     "public_key": <base64 of the 32-byte Ed25519 key>, "pop": <base64 of 64 bytes>}

``pop`` is the node's proof-of-possession signature (``ledger.core.entries.pop_message``), the
one the ``key-registration`` entry carries; ``key_id`` is redundant (SHA-256 of the key, cut to
8 bytes), so that the operator can read it out to the node over another channel before
registering, and it must match. ``read_registration`` accepts that file or a ``NAME.pub`` file
of ``ledger keys new`` (``ledger.keys.NodePublic``). No secret is ever in it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.core.encoding import b64_decode, b64_encode, hex_encode
from ledger.core.errors import BadInput, KeyFileError, NotRegistered
from ledger.core.fsutil import read_small
from ledger.keys import KIND_PUBLIC, NodePublic, check_name
from ledger.keys import _load_json as load_key_json

KIND_EXPORT = "kernel-ledger/node-key-export/v1"
EXPORT_FIELDS = frozenset({"kind", "name", "key_id", "public_key", "pop"})
MAX_EXPORT = 4096


def export_name(name: str) -> str:
    """The file name the guide uses for NAME's export."""
    return f"{name}.node.json"


def export_bytes(pub: NodePublic) -> bytes:
    obj = {
        "kind": KIND_EXPORT,
        "name": pub.name,
        "key_id": hex_encode(pub.key_id),
        "public_key": b64_encode(pub.public),
        "pop": b64_encode(pub.pop),
    }
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode("utf-8")


def export_node_key(keydir: Path, name: str) -> tuple[NodePublic, bytes]:
    """NAME's public half from ``keydir`` (``NAME.pub``, whose secret ``NAME.key`` must exist:
    a ``.pub`` alone is what an interrupted ``keys new`` leaves) and its export file bytes."""
    check_name(name)
    pub_path, key_path = keydir / f"{name}.pub", keydir / f"{name}.key"
    if not os.path.lexists(key_path) or not os.path.lexists(pub_path):
        raise KeyFileError(f"no node key named {name!r} in {keydir} (run `ledger keys new {name}`)")
    data = _read(pub_path, "public key file")
    pub = NodePublic.from_bytes(data, str(pub_path))
    return pub, export_bytes(pub)


def _read(path: Path, what: str) -> bytes:
    try:
        return read_small(path, MAX_EXPORT, what, follow_symlinks=False)
    except BadInput as e:
        raise KeyFileError(str(e)) from e


def read_registration(data: bytes, where: str) -> NodePublic:
    """A node's public key from an export file or a ``.pub`` file (``KeyFileError`` for
    anything else, a key id that does not match, or a proof of possession that fails)."""
    obj = load_key_json(data, where)  # at most MAX_KEY_FILE bytes, a JSON object
    kind = obj.get("kind")
    if kind == KIND_PUBLIC:
        return NodePublic.from_bytes(data, where)
    if kind != KIND_EXPORT:
        raise KeyFileError(f"{where}: kind {str(kind)[:80]!r} is not {KIND_EXPORT!r} (the file "
                           "`ledger keys export NAME` writes)")
    extra = set(obj) - EXPORT_FIELDS
    if extra or set(obj) != EXPORT_FIELDS:
        missing = EXPORT_FIELDS - set(obj)
        raise KeyFileError(f"{where}: expected exactly {sorted(EXPORT_FIELDS)}"
                           + (f"; unknown {sorted(extra)[:5]}" if extra else "")
                           + (f"; missing {sorted(missing)}" if missing else ""))
    try:
        pub = NodePublic(
            check_name(str(obj["name"])),
            b64_decode(str(obj["public_key"]), 32, "public key"),
            b64_decode(str(obj["pop"]), 64, "proof of possession"),
        )
    except BadInput as e:
        raise KeyFileError(f"{where}: {e}") from e
    if str(obj["key_id"]) != hex_encode(pub.key_id):
        raise KeyFileError(f"{where}: key_id {str(obj['key_id'])[:20]!r} is not the id of its "
                           f"public key ({hex_encode(pub.key_id)})")
    # the proof of possession, checked as for a .pub file
    return NodePublic.from_bytes(
        json.dumps({"kind": KIND_PUBLIC, "name": pub.name, "public_key": obj["public_key"],
                    "pop": obj["pop"]}).encode("utf-8"),
        where,
    )


def load_registration(key: str, keydir: Path) -> tuple[NodePublic, Path]:
    """``ledger keys register KEY``: a file path (an export or a ``.pub`` file) when one
    exists or KEY looks like a path, else a key NAME in ``keydir``."""
    path = Path(key)
    looks_like_file = "/" in key or path.suffix in (".pub", ".json")
    if not looks_like_file and ((keydir / f"{key}.pub").exists() or not path.is_file()):
        check_name(key)
        path = keydir / f"{key}.pub"
    return read_registration(_read(path, "node key file"), str(path)), path


def not_registered_message(name: str, key_id: bytes, server: str, why: str) -> str:
    """What ``ledger submit`` says when the log refused the node key: the commands the node
    and the operator run."""
    out = export_name(name)
    return (
        f"the log at {server} does not accept node key {name} ({hex_encode(key_id)}): {why}. "
        f"Send the operator the file `ledger keys export {name} --out {out}` writes; the "
        f"operator runs `ledger keys register {out}` on the log's machine. A revoked key cannot "
        "be registered again: make a new one first (`ledger keys new NEWNAME`)"
    )


@contextmanager
def explain_refusal(name: str, key_id: bytes, server: str) -> Iterator[None]:
    """Around ``submit_bundle``: a ``NotRegistered`` refusal becomes the message above."""
    try:
        yield
    except NotRegistered as e:
        raise NotRegistered(not_registered_message(name, key_id, server, _why(str(e)))) from e


def _why(message: str) -> str:
    tail = message.rsplit(": ", 1)[-1]
    return tail if "registered" in tail else "it is not a registered, unrevoked node key"
