"""Log entries (SPEC 4, 5): their canonical bytes, signatures, and the node-key registry.

An entry is one leaf: canonical JSON (RFC 8785) of an object whose ``type`` is ``bundle``,
``key-registration`` or ``key-revocation``. Every entry carries the ``origin`` of its log, a chain
link ``prev_size`` / ``prev_root`` naming a tree its signer had verified, and an Ed25519
``signature`` over the canonical bytes of the entry without that field. Two formats (SPEC 4,
docs/design.md "Entries"), both valid forever:

* **v1** (no ``v`` member; written before shared sealing was batched): ``prev_size`` is the
  entry's own index and ``prev_root`` the root of the tree just before it;
* **v2** (``"v": 2``): ``prev_size`` / ``prev_root`` are the size and root of *a* checkpoint the
  signer verified: ``prev_size`` is at most the entry's index and ``prev_root`` is the log's root
  at that size (the named tree is a prefix of the log). A local seal names the tree just before
  the entry, a remote node (``ledger submit``) any checkpoint it verified, so concurrent
  submissions no longer invalidate each other. ``chain_problem`` is the one check of both rules.

The signers:

* ``bundle``: signed by a registered, unrevoked node key (``signer`` = its key id);
* ``key-registration``: signed by the log key; carries the node's public key and its
  proof-of-possession ``pop`` (the node key's signature over ``POP_CONTEXT || name || 0x0a ||
  public key``);
* ``key-revocation``: signed by the log key.

Node key id = the first 8 bytes of SHA-256(public key), 16 hex digits at the edges.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol

import nacl.bindings
import nacl.exceptions
import nacl.signing

from ledger.core import merkle, native
from ledger.core.bundle import manifest_digests
from ledger.core.canonical import (
    MAX_SAFE_INTEGER,
    canonical_json,
    canonical_json_extend,
    encode_plain,
    encode_string,
    loads_canonical,
)
from ledger.core.encoding import b64_decode, b64_encode, hex_decode, hex_encode
from ledger.core.errors import BadInput, SignatureError, TamperDetected, VerificationFailed
from ledger.core.native import (
    SHAPE_CHECKS,
    SHAPE_KERNEL,
    SHAPE_OBLIGATIONS,
    join_plain,
    sign_many,
)

MAX_ENTRY_BYTES = 65535
ENTRY_V1 = 1  # no "v" member: prev_size is the entry's index
ENTRY_V2 = 2  # "v": 2: prev_size/prev_root name a verified prefix of the log
ENTRY_VERSION = ENTRY_V2  # the format every new entry is written in
CHAIN_WINDOW = 16384  # roots of this many recent sizes kept by ``ChainCheck``
POP_CONTEXT = b"kernel-ledger key-registration v1\n"
ENTRY_TYPES = ("bundle", "key-registration", "key-revocation")
KEY_TYPES = ("key-registration", "key-revocation")  # the entries only the log key signs
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")

_REQUIRED: dict[str, dict[str, type]] = {
    "bundle": {
        "bundle_digest": str,
        "manifest": str,
        "kernel": dict,
        "obligations": list,
        "checks": list,
        "signer": str,
    },
    "key-registration": {"key_id": str, "name": str, "public_key": str, "pop": str},
    "key-revocation": {"key_id": str, "reason": str},
}
_COMMON: dict[str, type] = {
    "type": str,
    "origin": str,
    "time": str,
    "prev_size": int,
    "prev_root": str,
    "signature": str,
}
# (field, its JSON type) per entry type: the common fields, then the type's own
_FIELDS = {t: tuple({**_COMMON, **own}.items()) for t, own in _REQUIRED.items()}


def node_key_id(public: bytes) -> bytes:
    return hashlib.sha256(public).digest()[:8]


def pop_message(name: str, public: bytes) -> bytes:
    return POP_CONTEXT + name.encode("utf-8") + b"\n" + public


def signing_bytes(entry: Mapping[str, Any]) -> bytes:
    """The exact bytes a signature covers: canonical JSON of the entry without ``signature``."""
    return canonical_json({k: v for k, v in entry.items() if k != "signature"})


def sign_entry(fields: Mapping[str, Any], key: nacl.signing.SigningKey) -> bytes:
    """Sign ``fields`` (no ``signature`` key) and return the entry bytes, checked for size."""
    return sign_fields(dict(fields), secret_key64(key))


def secret_key64(key: nacl.signing.SigningKey) -> bytes:
    """libsodium's 64-byte Ed25519 secret key of ``key`` through PyNaCl's public API: its 32-byte
    seed (``bytes(key)``) followed by its public key, the layout ``crypto_sign_seed_keypair``
    writes (issue 30: no private attribute of a dependency)."""
    return bytes(key) + bytes(key.verify_key)


def sign_fields(fields: dict[str, Any], sk64: bytes) -> bytes:
    """``sign_entry`` with libsodium's 64-byte secret key ``sk64``."""
    return sign_encoded([canonical_json_extend(fields, "signature")], sk64)[0]


def sign_encoded(
    pairs: Sequence[tuple[bytes, Callable[[str], bytes]]], sk64: bytes
) -> list[bytes]:
    """Sign encoded entries: each pair is the signing bytes and the function that encodes the
    entry with its signature (``canonical_json_extend``, ``BatchEncoder.encode``). All signed in
    one call (``ledger.core.native.sign_many``: libsodium without the GIL, no wrapper object per
    signature), then each checked against the entry size limit (``BadInput`` at the first
    over)."""
    out = []
    sigs = sign_many(sk64, [body for body, _ in pairs])
    for (_, with_signature), sig in zip(pairs, sigs, strict=True):
        data = with_signature(b64_encode(sig))
        if len(data) > MAX_ENTRY_BYTES:
            raise BadInput(
                f"entry is {len(data)} bytes, over the {MAX_ENTRY_BYTES}-byte entry limit"
            )
        out.append(data)
    return out


class BundleHead(Protocol):
    """What a ``bundle`` entry names of its bundle (a ``Bundle`` has it): its digest and
    manifest."""

    @property
    def digest(self) -> bytes: ...

    @property
    def manifest(self) -> bytes: ...


def bundle_fields(
    chain: Mapping[str, Any], bundle: BundleHead, extra: Mapping[str, Any], signer: bytes
) -> dict[str, Any]:
    """The fields of a ``bundle`` entry (before signing): the chain link ``chain`` (``origin``,
    ``time``, ``v``, ``prev_size``, ``prev_root``: ``chain_link``), the bundle's digest and
    manifest, the ``kernel``, ``obligations`` and ``checks`` from ``extra``, and the signer's
    node key id. The one place the entry's shape is written, for local seals and for
    submissions to a remote log."""
    own = bundle_own_fields(bundle, extra)
    return {"type": "bundle", **chain, **own, "signer": hex_encode(signer)}


def bundle_own_fields(bundle: BundleHead, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The members of a ``bundle`` entry that come from the bundle and its checks, not from the
    chain link or the signer (``bundle_fields`` adds those)."""
    return {
        "bundle_digest": hex_encode(bundle.digest),
        "manifest": bundle.manifest.decode("utf-8"),
        "kernel": dict(extra.get("kernel", {})),
        "obligations": list(extra.get("obligations", [])),
        "checks": list(extra.get("checks", [])),
    }


@dataclass(frozen=True)
class _ProbeHead:
    digest: bytes = bytes(32)
    manifest: bytes = b""


_SHAPE_KINDS = {"kernel": SHAPE_KERNEL, "obligations": SHAPE_OBLIGATIONS, "checks": SHAPE_CHECKS}


def _with_signature(head: bytes, tail: bytes, value: str) -> bytes:
    """An entry encoded by ``join_plain`` with its signature member (``BatchEncoder.encode``)."""
    return head + b',"signature":' + encode_string(value).encode("utf-8") + tail


class BatchEncoder:
    """``canonical_json_extend(bundle_fields(link + time, head, extra, signer), "signature")``
    for the entries of one batch (``Log.seal_many``), which share their chain link and signer:
    the members those make are encoded once (the layout is learnt from ``bundle_fields`` itself),
    and each entry encodes only its own (``bundle_own_fields`` and its time): in one call to
    ``native.join_plain`` per half, which judges the shape rules on the way (~3 µs an entry
    where the two steps below took ~7, docs/benchmarks.md), or, where that gives None or is not
    built, with ``check_bundle_shape`` and the C encoder of ``json``. The same bytes
    (tests/ledger/test_sealers.py checks it on random input); a batch whose shared
    members are not plain JSON (``plain_entry``) takes ``canonical_json_extend`` for every
    entry. ``encode`` also applies the bundle shape rules (``check_entry_shape``)."""

    def __init__(self, link: Mapping[str, Any], signer: bytes) -> None:
        self.link = dict(link)
        self.signer = signer
        probe = bundle_fields({**self.link, "time": ""}, _ProbeHead(), {}, signer)
        own = {*bundle_own_fields(_ProbeHead(), {}), "time"}
        self.plain = "signature" not in probe and plain_entry(probe)
        # the text between the members each entry encodes itself: texts[k] comes before
        # slots[k], texts[-1] closes the object; the signature's slot is marked with None
        self.texts: list[str] = []
        self.slots: list[str | None] = []
        buf = "{"
        # ASCII names: code-point order is UTF-16's
        for k in sorted([*probe, "signature"]) if self.plain else ():
            sep = "" if buf == "{" and not self.texts else ","
            if k == "signature":
                self.texts.append(buf)
                self.slots.append(None)
                buf = ""
            elif k in own:
                self.texts.append(buf + sep + encode_string(k) + ":")
                self.slots.append(k)
                buf = ""
            else:
                buf += sep + encode_string(k) + ":" + canonical_json(probe[k]).decode("utf-8")
        self.texts.append(buf + "}")
        # for ``native.join_plain``: the parts before and after the signature, each member's
        # slot to fill in (its position, its name), and where the shaped members fall
        self.parts: tuple[list[Any], list[Any]] = ([], [])
        self.fill: tuple[list[tuple[int, str]], list[tuple[int, str]]] = ([], [])
        shapes: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        side = 0
        for i, slot in enumerate(self.slots):
            self.parts[side].append(self.texts[i].encode("utf-8"))
            if slot is None:
                side = 1
                continue
            self.fill[side].append((len(self.parts[side]), slot))
            if slot in _SHAPE_KINDS:
                shapes[side].append((len(self.parts[side]), _SHAPE_KINDS[slot]))
            self.parts[side].append(None)
        self.parts[side].append(self.texts[-1].encode("utf-8"))
        self.shapes = (tuple(shapes[0]), tuple(shapes[1]))
        # every shaped member must be judged by join_plain, or none is taken from it
        self.native = self.plain and side == 1 and sum(map(len, shapes)) == len(_SHAPE_KINDS)

    def encode(
        self, time: str, head: BundleHead, extra: Mapping[str, Any]
    ) -> tuple[bytes, Callable[[str], bytes]]:
        """The signing bytes of the entry and the function that gives the entry with its
        signature (``canonical_json_extend``'s pair); ``BadInput`` when the shape rules refuse
        it."""
        if not self.plain:
            obj = bundle_fields({**self.link, "time": time}, head, extra, self.signer)
            check_entry_shape(obj)
            return canonical_json_extend(obj, "signature", known_plain=plain_entry(obj))
        own = bundle_own_fields(head, extra)
        own["time"] = time
        if self.native:  # in C: encoded and shape-checked at once, else the Python path
            halves = []
            for side in (0, 1):
                parts = self.parts[side].copy()
                for at, name in self.fill[side]:
                    parts[at] = own[name]
                halves.append(join_plain(parts, self.shapes[side]))
            head_bytes, tail_bytes = halves
            if head_bytes is not None and tail_bytes is not None:
                return head_bytes + tail_bytes, partial(_with_signature, head_bytes, tail_bytes)
        check_bundle_shape(own)
        encode = encode_plain
        before: list[str] = []
        after: list[str] = []
        out = before
        texts = self.texts
        for k, slot in enumerate(self.slots):
            out.append(texts[k])
            if slot is None:
                out = after
            else:
                out.append(encode(own[slot]))
        after.append(texts[-1])
        head_text, tail_text = "".join(before), "".join(after)
        try:
            body = (head_text + tail_text).encode("utf-8")
        except UnicodeEncodeError as e:
            raise BadInput("a string holds a lone surrogate, which is not valid Unicode") from e

        def with_signature(value: str) -> bytes:
            return (head_text + ',"signature":' + encode(value) + tail_text).encode("utf-8")

        return body, with_signature


def chain_link(size: int, root: bytes) -> dict[str, Any]:
    """The chain members of a new (v2) entry naming the verified tree ``size`` / ``root``."""
    return {"v": ENTRY_VERSION, "prev_size": size, "prev_root": hex_encode(root)}


def chain_problem(
    entry: Entry,
    index: int,
    root_before: bytes | None,
    root_at: Callable[[int], bytes | None],
) -> str | None:
    """Why the chain link of ``entry`` (at ``index``) is wrong, or None when it holds.

    ``root_before`` is the log's root at size ``index`` (the tree just before the entry; None
    when the caller knows it is not needed: a v2 entry naming another size);
    ``root_at(size)`` the log's root at an older size (None when it cannot be had). v1: the link
    must name exactly the tree before the entry; v2: a tree of size at most ``index`` whose root is
    the log's root at that size (a prefix of the log)."""
    return link_problem(entry.v, entry.prev_size, entry.prev_root, index, root_before, root_at)


def link_problem(
    v: int,
    size: int,
    named: str,
    index: int,
    root_before: bytes | None,
    root_at: Callable[[int], bytes | None],
) -> str | None:
    """``chain_problem`` of an entry of format ``v`` whose link names ``size`` and the root
    ``named`` (hex), given as plain values (``ledger.audit`` reads them without an ``Entry``)."""
    if v == ENTRY_V1:
        if size != index or root_before is None or named != hex_encode(root_before):
            return f"chain link (prev_size {size}/prev_root) is not the tree before entry {index}"
        return None
    if size > index:
        return f"names a tree of size {size}, beyond its own index {index}"
    root = root_before if size == index and root_before is not None else root_at(size)
    if root is None:
        return f"names a tree of size {size} whose root cannot be recomputed here"
    if named != hex_encode(root):
        return f"names a tree of size {size} that is not a prefix of this log (another root)"
    return None


class ChainCheck:
    """``chain_problem`` for entries met in index order. It keeps the tree's right edge at each of
    the last ``window`` sizes (a tuple each, no hashing: the trees submitters and batch seals name
    are recent) and computes a root only for a size an entry names, once (the last
    ``ROOTS_KEPT`` are kept); for older sizes it asks ``older``."""

    ROOTS_KEPT = 256

    def __init__(
        self, older: Callable[[int], bytes | None] | None = None, window: int = CHAIN_WINDOW
    ) -> None:
        self.older = older
        self.window = window
        self.edges: OrderedDict[int, tuple[tuple[int, bytes], ...]] = OrderedDict()
        self.roots: OrderedDict[int, bytes] = OrderedDict()

    def root_at(self, size: int) -> bytes | None:
        hit = self.roots.get(size)
        if hit is None:
            edge = self.edges.get(size)
            if edge is not None:
                hit = merkle.edge_root(edge)
            elif self.older is not None:
                hit = self.older(size)
            if hit is None:
                return None
            self.roots[size] = hit
            if len(self.roots) > self.ROOTS_KEPT:
                self.roots.popitem(last=False)
        return hit

    def check(self, entry: Entry, index: int, frontier: merkle.Frontier) -> str | None:
        """The problem with ``entry``'s link (None when it holds); ``frontier`` is the tree of
        the ``index`` entries before it, whose edge is recorded here."""
        return self.check_link(entry.v, entry.prev_size, entry.prev_root, index, frontier)

    def check_link(
        self, v: int, size: int, named: str, index: int, frontier: merkle.Frontier
    ) -> str | None:
        """``check`` of a link given as plain values (``link_problem``)."""
        if frontier.size != index:
            raise ValueError(f"frontier of size {frontier.size} given for entry {index}")
        self.edges[index] = frontier.edge()
        if len(self.edges) > self.window:
            self.edges.popitem(last=False)
        needed = v == ENTRY_V1 or size == index
        return link_problem(v, size, named, index, self.root_at(index) if needed else None,
                            self.root_at)


def signed_part(data: bytes, entry: Mapping[str, Any]) -> bytes:
    """The signing bytes of canonical entry bytes ``data`` (already accepted by
    ``decode_entry``), cut out of ``data`` itself instead of serialising again: in canonical JSON
    the object without ``signature`` is the same text less that one member and one comma."""
    member = b'"signature":"' + str(entry["signature"]).encode("ascii") + b'"'
    for cut in (b"," + member, member + b","):
        if data.count(cut) == 1:
            return data.replace(cut, b"", 1)
    return signing_bytes(entry)


def verify_signature(entry: Mapping[str, Any], public: bytes, data: bytes | None = None) -> None:
    """Check the entry's signature under ``public``; with the entry's exact bytes ``data``, the
    signed bytes are cut from them (faster, and exactly what was stored)."""
    sig = b64_decode(str(entry["signature"]), 64, "entry signature")
    msg = signing_bytes(entry) if data is None else signed_part(data, entry)
    try:
        nacl.bindings.crypto_sign_open(sig + msg, public)  # libsodium itself, no key object
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError) as e:
        raise SignatureError("entry signature does not verify") from e


@dataclass(frozen=True)
class Entry:
    """One decoded log entry: its exact bytes, the object they parse to, and its fields, typed.

    The fields a type does not carry are ``None`` (``signer`` of a key entry, ``key_id`` of a
    bundle entry, ...). Text fields stay as the JSON has them (hex key ids and digests, base64
    keys). ``fields`` is the whole object, for what needs every member (shape checks, JSON
    output); a signature covers ``data``, the exact bytes: cut them with ``signed_part``, never
    serialise ``fields`` again. A later entry version adds its fields here with a default."""

    data: bytes = dataclasses.field(repr=False)
    fields: Mapping[str, Any] = dataclasses.field(repr=False)
    type: str
    origin: str
    time: str
    signature: str
    # the chain link: a tree its signer verified (v1: the tree just before this entry; v2: a
    # prefix of the log of size at most the entry's index; ``chain_problem``)
    prev_size: int
    prev_root: str
    # bundle entries
    signer: str | None = None
    bundle_digest: str | None = None
    manifest: str | None = None
    kernel: Mapping[str, Any] | None = None
    obligations: tuple[Any, ...] | None = None
    checks: tuple[Any, ...] | None = None
    # key-registration (key_id, name, public_key, pop) and key-revocation (key_id, reason)
    key_id: str | None = None
    name: str | None = None
    public_key: str | None = None
    pop: str | None = None
    reason: str | None = None
    # the entry format: ENTRY_V1 (no "v" member) or ENTRY_V2
    v: int = 1


def decode_entry(data: bytes) -> Entry:
    """Parse untrusted entry bytes: canonical JSON within the size limit and the entry shape."""
    obj, _ = entry_object(data)
    etype = obj["type"]
    typed: dict[str, Any] = {
        k: tuple(obj[k]) if isinstance(obj[k], list) else obj[k] for k in _REQUIRED[etype]
    }
    return Entry(
        data=bytes(data),
        fields=obj,
        type=etype,
        origin=obj["origin"],
        time=obj["time"],
        signature=obj["signature"],
        prev_size=obj["prev_size"],
        prev_root=obj["prev_root"],
        v=ENTRY_V2 if "v" in obj else ENTRY_V1,
        **typed,
    )


def decode_stored(index: int, data: bytes) -> Entry:
    """``decode_entry`` for the bytes a ledger stored at ``index``: the log wrote only valid
    entries, so bytes that no longer decode were altered in the database (exit 1, not the bad
    input ``decode_entry`` reports for bytes a user handed in)."""
    try:
        return decode_entry(data)
    except BadInput as e:
        raise TamperDetected(
            f"entry {index} as stored is not a valid entry ({e}): the database was altered "
            "(run `ledger audit`)"
        ) from e


class BundleView(NamedTuple):
    """What ``ledger audit`` (and the mirror) judge of a ``bundle`` entry, read in one pass
    (``bundle_view``). The compiled scanner's tuple has these members in this order
    (``ledger/core/_native.c``)."""

    origin: str
    prev_size: int
    prev_root: str  # hex
    version: int  # ENTRY_V1 or ENTRY_V2
    bundle_digest: bytes
    manifest: bytes  # its UTF-8 bytes
    signer: str  # hex key id
    signature: bytes  # 64 bytes
    signed: bytes  # the bytes the signature covers (``signed_part``)
    file_digests: list[bytes]  # those the manifest names (``manifest_digests``)
    shaped: bool  # kernel, obligations and checks keep the shape rules (``check_bundle_shape``)


def bundle_view(data: bytes) -> BundleView | None:
    """What ``ledger audit`` judges of a ``bundle`` entry, read in one pass (``BundleView``);
    None when ``entry_object`` refuses the bytes or they are another type of entry (the caller
    then takes ``entry_object``, which says why). The compiled scanner where built
    (``ledger.core.native.bundle_view``), else ``bundle_view_py``; tests/ledger/core/test_native.py
    holds the
    two to the same answers."""
    return bundle_view_fn()(data)


def bundle_view_fn() -> Callable[[bytes], BundleView | None]:
    """``bundle_view`` itself, without the dispatch (for loops over many entries): the compiled
    scanner's tuple is named with ``tuple.__new__``, a C call (no Python frame of its own)."""
    scan = native.bundle_view_c()
    if scan is None:
        return bundle_view_py
    name = tuple.__new__

    def view(data: bytes) -> BundleView | None:
        found = scan(data)
        return None if found is None else name(BundleView, found)

    return view


def bundle_view_py(data: bytes) -> BundleView | None:
    """``bundle_view`` from ``entry_object``."""
    try:
        obj, signature = entry_object(data)
    except BadInput:
        return None
    if obj["type"] != "bundle":
        return None
    manifest = obj["manifest"].encode("utf-8")
    try:
        check_bundle_shape(obj)
        shaped = True
    except BadInput:
        shaped = False
    return BundleView(obj["origin"], obj["prev_size"], obj["prev_root"],
                      ENTRY_V2 if "v" in obj else ENTRY_V1, hex_decode(obj["bundle_digest"]),
                      manifest, obj["signer"], signature, signed_part(data, obj),
                      manifest_digests(manifest), shaped)


def entry_object(data: bytes) -> tuple[dict[str, Any], bytes]:
    """``decode_entry``'s checks, without building the ``Entry``: the parsed object (known to
    have the members and types of its ``type``) and its signature's 64 bytes. For readers that
    go through the whole log (``ledger audit``)."""
    if len(data) > MAX_ENTRY_BYTES:
        raise BadInput(f"entry is larger than {MAX_ENTRY_BYTES} bytes")
    obj = loads_canonical(data, max_bytes=MAX_ENTRY_BYTES)
    if type(obj) is not dict:
        raise BadInput("entry is not a JSON object")
    etype = obj.get("type")
    if etype not in ENTRY_TYPES:
        raise BadInput(f"unknown entry type {etype!r}")
    for field, want in _FIELDS[etype]:
        if type(obj.get(field)) is not want:  # JSON gives exactly these types (a bool is no int)
            if field not in obj:
                raise BadInput(f"{etype} entry lacks {field!r}")
            raise BadInput(f"{etype} entry field {field!r} has the wrong type")
    if obj["prev_size"] < 0:
        raise BadInput("entry prev_size is negative")
    if "v" in obj and (type(obj["v"]) is not int or obj["v"] != ENTRY_V2):
        raise BadInput(f"unknown entry format version {str(obj['v'])[:20]!r} (this reader knows "
                       f"1, no \"v\" member, and {ENTRY_V2})")
    if _HEX64.fullmatch(obj["prev_root"]) is None:
        hex_decode(obj["prev_root"], 32, "entry prev_root")  # raises, with the reason
    signature = b64_decode(obj["signature"], 64, "entry signature")
    if _TIME.fullmatch(obj["time"]) is None:
        raise BadInput("entry time is not RFC 3339 UTC (YYYY-MM-DDTHH:MM:SSZ)")
    if etype == "bundle":
        if _HEX64.fullmatch(obj["bundle_digest"]) is None:
            raise BadInput("bundle entry digest is not 64 lowercase hex")
        if _HEX16.fullmatch(obj["signer"]) is None:
            raise BadInput("bundle entry signer is not a 16-hex key id")
    else:
        if _HEX16.fullmatch(obj["key_id"]) is None:
            raise BadInput("key entry key_id is not a 16-hex key id")
    if etype == "key-registration":
        pub = b64_decode(obj["public_key"], 32, "registered public key")
        if hex_encode(node_key_id(pub)) != obj["key_id"]:
            raise BadInput("registered key_id does not match the public key")
        b64_decode(obj["pop"], 64, "proof of possession")
    return obj, signature


MAX_CHECKS = 512
MAX_OBLIGATIONS = 64
MAX_TEXT = 1000  # characters of one text field of a bundle entry, but a check's detail
# A check's detail: the certificate lists every claimed obligation (about 130 characters each,
# up to MAX_OBLIGATIONS of them), so it is kept whole to this many characters; a longer detail is
# cut at a word boundary when sealed (ledger_cli.wiring.fit_text). The entry's byte limit still
# bounds the whole entry.
MAX_DETAIL = 10_000
CHECK_STATUSES = ("passed", "failed", "skipped")
_KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_KEYS = 16  # keys of one kernel / obligation / check object (later formats may add some)
_REQUIRED_KEYS: dict[str, frozenset[str]] = {
    "kernel": frozenset({"name", "version"}),
    "obligations": frozenset({"obligation", "theorem", "property"}),
    "checks": frozenset({"id", "status", "detail"}),
}


_GOOD_KEYS: set[str] = set()  # key names that passed _KEY_NAME (a pure rule: once good, good)
_GOOD_KEYS_MAX = 4096


def _string_map(obj: Any, field: str) -> None:
    if not isinstance(obj, dict) or len(obj) > MAX_KEYS:
        raise BadInput(
            f"bundle entry {field}: each item must be an object of at most {MAX_KEYS} keys"
        )
    if not _REQUIRED_KEYS[field] <= obj.keys():
        missing = _REQUIRED_KEYS[field] - obj.keys()
        raise BadInput(f"bundle entry {field}: an item lacks {sorted(missing)}")
    detail = field == "checks"
    for k, v in obj.items():
        if type(k) is not str or k not in _GOOD_KEYS:
            if type(k) is not str or _KEY_NAME.fullmatch(k) is None:
                raise BadInput(f"bundle entry {field}: key {str(k)[:40]!r} is not 1-64 letters, "
                               "digits, '.', '_' or '-'")
            if len(_GOOD_KEYS) < _GOOD_KEYS_MAX:
                _GOOD_KEYS.add(k)
        limit = MAX_DETAIL if detail and k == "detail" else MAX_TEXT
        if not isinstance(v, str) or len(v) > limit:
            raise BadInput(
                f"bundle entry {field}.{k} must be text of at most {limit} characters"
            )


_SHAPED = frozenset({"kernel", "obligations", "checks"})  # string maps: check_entry_shape


def plain_entry(entry: Mapping[str, Any]) -> bool:
    """True when a shape-checked entry (``check_entry_shape``) is plain JSON for
    ``canonical_json_extend(..., known_plain=True)``: its own members ASCII-named strings or safe
    integers, and its string maps checked by the shape rules (key names ASCII, values text)."""
    for k, v in entry.items():
        t = type(v)
        if not k.isascii() or not (t is str or k in _SHAPED or (
                t is int and -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER)):
            return False
    return True


def check_bundle_shape(own: Mapping[str, Any]) -> None:
    """The shape rules of a ``bundle`` entry's own members (``check_entry_shape``)."""
    _string_map(own.get("kernel"), "kernel")
    for field, limit in (("obligations", MAX_OBLIGATIONS), ("checks", MAX_CHECKS)):
        items = own.get(field)
        if not isinstance(items, list) or len(items) > limit:
            raise BadInput(f"bundle entry {field} must be a list of at most {limit} items")
        for item in items:
            _string_map(item, field)
    for c in own["checks"]:
        if c["status"] not in CHECK_STATUSES:
            raise BadInput(
                f"bundle entry check {c['id'][:40]!r} has status {c['status'][:20]!r}"
            )


def check_entry_shape(entry: Mapping[str, Any]) -> None:
    """Refuse an entry whose fields have shapes the log does not write (issue 9 item 8).

    A ``bundle``'s ``kernel`` holds ``name`` and ``version``; ``obligations`` is a list of
    objects with ``obligation``, ``theorem``, ``property``; ``checks`` a list of objects with
    ``id``, ``status`` (a known one) and ``detail`` (more text keys allowed: ``tool``,
    ``version``). Key names follow the key-file rule; every value is bounded text. Called before
    anything is appended (``seal``, the server for submissions, mirrors), so no reader of the log
    meets an odd shape that the log accepted. ``decode_entry`` stays lenient, so whatever is
    already stored can still be read and shown."""
    etype = entry.get("type")
    if etype == "bundle":
        check_bundle_shape(entry)
    elif etype == "key-registration":
        if not isinstance(entry.get("name"), str) or _KEY_NAME.fullmatch(entry["name"]) is None:
            raise BadInput("key-registration name must be 1-64 letters, digits, '.', '_' or '-'")
    elif etype == "key-revocation":
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
            raise BadInput("key-revocation reason must be 1 to 500 characters")
    else:
        raise BadInput(f"unknown entry type {str(etype)[:40]!r}")


@dataclass(frozen=True)
class NodeKey:
    key_id: bytes
    name: str
    public: bytes
    registered_at: int
    revoked_at: int | None = None
    revoke_reason: str = ""


def signer_rule(key: NodeKey | None, key_id: str, index: int) -> NodeKey:
    """``key`` (the registered node key of id ``key_id``, hex; None when there is none) when it
    may sign entry ``index``: registered before it and not revoked before it. Else
    ``VerificationFailed``."""
    if key is None or key.registered_at >= index:
        raise VerificationFailed(f"signer {key_id} was not registered before entry {index}")
    if key.revoked_at is not None and key.revoked_at < index:
        raise VerificationFailed(
            f"signer {key_id} was revoked at entry {key.revoked_at} ({key.revoke_reason})"
        )
    return key


class Registry:
    """Node keys as the log's own history defines them, replayed entry by entry.

    ``apply`` checks each entry's signature against the log key (registrations, revocations) or
    the registered node key (bundles) and the chaining rules, then records key events.
    """

    def __init__(self, log_public: bytes, origin: str) -> None:
        self.log_public = log_public
        self.origin = origin
        self.keys: dict[bytes, NodeKey] = {}

    def check_signer(self, key_id: bytes, index: int) -> NodeKey:
        """The node key allowed to sign entry ``index``; raise when it may not."""
        return signer_rule(self.keys.get(key_id), hex_encode(key_id), index)

    def check(self, index: int, data: bytes) -> Entry:
        """``apply`` without recording key events, for a registry that has replayed the log's key
        entries already: a key's registration and revocation indices alone decide which entries
        it may sign, so an audit checks chunks of the log in any order (``ledger.audit``)."""
        return self._checked(index, data)

    def _checked(self, index: int, data: bytes) -> Entry:
        entry = decode_entry(data)
        if entry.origin != self.origin:
            raise VerificationFailed(
                f"entry {index} names origin {entry.origin!r}, not this log's {self.origin!r}"
            )
        public = self.log_public
        if entry.signer is not None:
            public = self.check_signer(hex_decode(entry.signer), index).public
        verify_signature(entry.fields, public, data)
        return entry

    def apply(self, index: int, data: bytes) -> Entry:
        """Check entry ``index`` against the rules and record its key events (readers of many
        entries verify bundle signatures in batches instead: ``ledger.core.native.verify_many``)."""
        entry = self._checked(index, data)
        if entry.key_id is None:
            return entry
        kid = hex_decode(entry.key_id)
        if entry.type == "key-registration":
            assert entry.public_key is not None and entry.name is not None and entry.pop is not None
            if kid in self.keys:
                raise VerificationFailed(
                    f"entry {index} registers key {hex_encode(kid)} a second time")
            pub = b64_decode(entry.public_key, 32)
            try:
                nacl.signing.VerifyKey(pub).verify(
                    pop_message(entry.name, pub), b64_decode(entry.pop, 64)
                )
            except nacl.exceptions.BadSignatureError as e:
                raise SignatureError(f"entry {index}: proof of possession does not verify") from e
            self.keys[kid] = NodeKey(kid, entry.name, pub, index)
        else:
            assert entry.reason is not None
            old = self.keys.get(kid)
            if old is None or old.revoked_at is not None:
                raise VerificationFailed(
                    f"entry {index} revokes unknown or revoked key {hex_encode(kid)}"
                )
            self.keys[kid] = NodeKey(
                kid, old.name, old.public, old.registered_at, index, entry.reason
            )
        return entry
