"""The compiled inner loops (``ledger/core/_native.c``) and their pure-Python twins (issue 12).

The C module is built by ``pip install`` where a C compiler is found (``scripts/setup.sh`` does
it; ``setup.py`` marks it optional). Each function below calls it when it is there and its
pure-Python twin when it is not, with the same answers (``tests/ledger/core/test_native.py`` runs
both):

* ``parse_plain(data, max_depth)``: the value of canonical JSON bytes in the plain subset every
  log entry is written in, or ``NOT_PLAIN`` when the bytes are outside it; the caller
  (``ledger.core.canonical.loads_canonical``) then runs the full parse, which accepts or refuses
  with
  its precise message. It never accepts what the full parse refuses.
* ``bundle_view(data)``: what ``ledger audit`` and ``ledger mirror`` judge of a bundle entry, read
  in one pass (its twin, built on ``entry_object``, is ``ledger.core.entries.bundle_view_py``);
* ``join_plain(parts, shapes)``: canonical JSON of plain values joined with bytes, the bundle
  shape rules judged on the way (``ledger.core.entries.BatchEncoder``, the entries of a batch seal);
  its twin is the encoder and the rules of ``ledger.core.canonical`` and ``ledger.core.entries``,
  which
  run whenever it gives None;
* ``sign_many(sk64, messages)`` / ``verify_many(jobs)``: Ed25519 over many messages in one call
  to libsodium without the GIL, so a thread can sign or verify while another runs Python; the
  twins call PyNaCl once per message, holding the GIL. The C side loads the system's shared
  libsodium (``SODIUM_NAMES``; Debian ``libsodium23``) through its public C API, not PyNaCl's
  private extension module (issue 30); where none is found these two run their twins
  (``SIGNING`` is False) and the rest of the module still runs.

``LEDGER_NATIVE=0`` in the environment runs the twins even where the module is built (tests,
and benchmarks that compare the two in one run). Nothing here decides what is accepted: both
sides implement the same rules, and the C side may only be stricter about what it takes on
itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import nacl.bindings
import nacl.exceptions

# the shared libsodium sign_many/verify_many call, by soname (1.0.19 on: .26; Debian 12's
# libsodium23: .23), found by the dynamic loader; scripts/setup.sh installs it
SODIUM_NAMES = ("libsodium.so.26", "libsodium.so.23", "libsodium.so", "libsodium.dylib")
ABI = 2  # _native.c's NATIVE_ABI: the calling convention this module expects of it
NOT_PLAIN: Any = object()  # parse_plain's "outside the subset: run the full parse"
VerifyJob = tuple[bytes, bytes, bytes]  # (32-byte public key, message, 64-byte signature)


def _load() -> Any:
    if os.environ.get("LEDGER_NATIVE", "1") == "0":
        return None
    try:
        from ledger.core import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    if getattr(_native, "ABI", None) != ABI:  # built from another _native.c: never call it
        return None
    return _native


def _bind(module: Any) -> Any:
    """``module`` once its Ed25519 functions are bound to a shared libsodium, else None."""
    for name in SODIUM_NAMES if module is not None else ():
        try:
            module.bind_sodium(name)
        except OSError:
            continue
        return module
    return None


_C = _load()
_SIGN = _bind(_C)  # sign_many/verify_many: the parsers run without libsodium, these do not
AVAILABLE = _C is not None  # which side runs (tests; docs/design.md says how to ask)
SIGNING = _SIGN is not None  # whether sign_many/verify_many run in C (a libsodium was found)


def parse_plain(data: bytes, max_depth: int) -> Any:
    """The value of ``data`` when it is canonical JSON in the plain subset (objects with
    printable-ASCII keys in strictly increasing order, minimally escaped UTF-8 strings, integers
    in canonical form within 2**53, ``true``, ``false``, ``null``, no whitespace, nesting at most
    ``max_depth``), else ``NOT_PLAIN``. Without the C module: ``NOT_PLAIN`` always (the full
    parse in ``ledger.core.canonical`` then does all the work, as it did before this module)."""
    if _C is None:
        return NOT_PLAIN
    value = _C.parse_plain(data, max_depth)
    return NOT_PLAIN if value is NotImplemented else value


# ``ledger.core.entries.BundleView`` names these members
BundleTuple = tuple[str, int, str, int, bytes, bytes, str, bytes, bytes, list[bytes], bool]


def bundle_view(data: bytes) -> BundleTuple | None:
    """The members of a ``bundle`` entry that ``ledger audit`` judges, from the C scanner (its
    comment in ``ledger/core/_native.c`` says which and how they are judged), or None: not such an
    entry by those rules, or no C module (``ledger.core.entries.bundle_view`` has the twin)."""
    if _C is None:
        return None
    view: BundleTuple | None = _C.bundle_view(data)
    return view


def bundle_view_c() -> Callable[[bytes], BundleTuple | None] | None:
    """The compiled ``bundle_view`` itself (no Python frame per call), or None."""
    return None if _C is None else _C.bundle_view


SHAPE_KERNEL, SHAPE_OBLIGATIONS, SHAPE_CHECKS = 0, 1, 2  # join_plain's shape kinds


def join_plain(parts: list[Any], shapes: tuple[tuple[int, int], ...] = ()) -> bytes | None:
    """``parts`` end to end: a ``bytes`` part as it is, any other part as its canonical JSON,
    where every value is in the plain subset (``ledger.core.canonical.encode_plain``) and each part
    ``shapes`` names (its position, a ``SHAPE_*`` kind) keeps the bundle shape rules
    (``ledger.core.entries.check_bundle_shape``). None otherwise, and always without the C module:
    the caller then takes the Python path, which encodes or refuses with its message."""
    if _C is None:
        return None
    got = _C.join_plain(parts, shapes)
    return got if type(got) is bytes else None


def sign_many_py(sk64: bytes, messages: list[bytes]) -> list[bytes]:
    """``sign_many``'s twin: PyNaCl once per message."""
    n = nacl.bindings.crypto_sign_BYTES
    return [nacl.bindings.crypto_sign(m, sk64)[:n] for m in messages]


def verify_many_py(jobs: Sequence[VerifyJob]) -> list[int]:
    """``verify_many``'s twin: PyNaCl once per job."""
    bad = []
    for i, (public, msg, sig) in enumerate(jobs):
        try:
            nacl.bindings.crypto_sign_open(sig + msg, public)
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
            bad.append(i)
    return bad


def sign_many(sk64: bytes, messages: list[bytes]) -> list[bytes]:
    """The Ed25519 signatures (64 bytes each) of ``messages`` under libsodium's 64-byte secret
    key ``sk64``, in order; in C without the GIL where built."""
    if _SIGN is None:
        return sign_many_py(sk64, messages)
    return list(_SIGN.sign_many(sk64, messages))


class Verifying:
    """``verify_many`` of ``jobs`` running on ``threads`` threads of its own, so the caller goes
    on (a mirror stores a batch while its signatures are checked); ``result()`` waits for them
    and gives ``verify_many``'s answer. Without the C module the twin runs here, at once (it
    holds the GIL: a thread would gain nothing)."""

    def __init__(self, jobs: Sequence[VerifyJob], threads: int = 1) -> None:
        import threading

        jobs = list(jobs)
        self._bad: list[int] | None = None
        self._threads: list[threading.Thread] = []
        if _SIGN is None:
            self._bad = verify_many_py(jobs)
            return
        step = max(1, -(-len(jobs) // max(1, threads)))
        parts = [jobs[i : i + step] for i in range(0, len(jobs), step)]
        self._found: list[list[int]] = [[] for _ in parts]
        self._failed: list[BaseException] = []

        def run(k: int) -> None:
            try:
                self._found[k] = [k * step + i for i in _SIGN.verify_many(parts[k])]
            except BaseException as e:  # fail closed: result() raises it, never "all good"
                self._failed.append(e)

        self._threads = [threading.Thread(target=run, args=(k,), daemon=True)
                         for k in range(len(parts))]
        for t in self._threads:
            t.start()

    def result(self) -> list[int]:
        if self._bad is None:
            for t in self._threads:
                t.join()
            if self._failed:
                raise self._failed[0]
            self._bad = [i for part in self._found for i in part]
        return self._bad


def verify_many(jobs: Sequence[VerifyJob], threads: int = 1) -> list[int]:
    """The positions in ``jobs`` whose signature does not verify, in order (a key or signature
    of the wrong length does not verify); in C without the GIL where built, on ``threads``
    threads of its own (``Verifying``) for a batch large enough."""
    if _SIGN is None:
        return verify_many_py(jobs)
    jobs = list(jobs)
    if threads <= 1 or len(jobs) < 64:
        return list(_SIGN.verify_many(jobs))
    return Verifying(jobs, threads).result()
