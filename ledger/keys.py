"""Key files (SPEC 5): the log key and node keys, secrets at rest.

* Log key: ``LEDGER_HOME/log.key`` holds Go's ``PRIVATE+KEY+<origin>+<id>+<base64>`` note signer
  string (mode 0600); ``log.vkey`` holds the verifier key string ``ledger vkey`` prints.
* Node keys: ``LEDGER_HOME/keys/<NAME>.key`` (mode 0600) is JSON with the 32-byte Ed25519
  seed, in the clear or, with a passphrase, sealed with XSalsa20-Poly1305
  (``nacl.secret.SecretBox``) under a key derived by Argon2id (``nacl.pwhash.argon2id``,
  moderate limits); ``<NAME>.pub`` holds the name, public key and proof-of-possession
  signature that ``ledger keys register`` appends to the log.

Files are written by ``ledger.core.fsutil.write_atomic`` (never following a planted symlink; the
stray
temporary a ``keys new`` killed mid-write leaves, 0600 in the 0700 ``keys/``, is removed by the
next ``keys new`` of that name) and never overwritten; ``keys/`` and the ledger directory above
it are made 0700 whatever the umask.
Reading, ``keys/`` must be private (``check_private_dir``: not a symlink to a directory others
can write, this user's, not writable by group or others), a ``.key`` file a regular file of this
user that group and others can neither read nor write (``check_secret_file``, as ssh refuses an
unprotected key), and no key file is read through a symlink. No message quotes a key file's
content.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.exceptions
import nacl.pwhash
import nacl.secret
import nacl.signing
import nacl.utils

from ledger.core.encoding import b64_decode, b64_encode
from ledger.core.entries import node_key_id, pop_message
from ledger.core.errors import BadInput, KeyFileError
from ledger.core.fsutil import (
    check_private_dir,
    check_secret_file,
    private_dir,
    read_small,
    stale_temporaries,
    write_atomic,
)

__all__ = ["write_atomic"]  # re-exported: older callers import it from here

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_KEY_FILE = 4096
KIND_SECRET = "kernel-ledger/node-secret-key/v1"
KIND_PUBLIC = "kernel-ledger/node-public-key/v1"


def check_name(name: str) -> str:
    if NAME_RE.fullmatch(name) is None:
        shown = repr(name) if len(name) <= 80 else f"{name[:64]!r}... ({len(name)} characters)"
        raise KeyFileError(
            f"bad key name {shown}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class NodePublic:
    name: str
    public: bytes
    pop: bytes

    @property
    def key_id(self) -> bytes:
        return node_key_id(self.public)

    def to_bytes(self) -> bytes:
        obj = {
            "kind": KIND_PUBLIC,
            "name": self.name,
            "public_key": b64_encode(self.public),
            "pop": b64_encode(self.pop),
        }
        return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "public key file") -> NodePublic:
        obj = _load_json(data, where)
        if obj.get("kind") != KIND_PUBLIC:
            raise KeyFileError(f"{where} is not a kernel-ledger node public key")
        try:
            name = check_name(str(obj["name"]))
            pub = b64_decode(str(obj["public_key"]), 32, "public key")
            pop = b64_decode(str(obj["pop"]), 64, "proof of possession")
        except KeyError as e:
            raise KeyFileError(f"{where} lacks {e}") from e
        try:
            nacl.signing.VerifyKey(pub).verify(pop_message(name, pub), pop)
        except nacl.exceptions.BadSignatureError as e:
            raise KeyFileError(f"{where}: proof of possession does not verify") from e
        return cls(name, pub, pop)


def _load_json(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > MAX_KEY_FILE:
        raise KeyFileError(f"{where} is larger than {MAX_KEY_FILE} bytes")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise KeyFileError(f"{where} is not a JSON key file") from e
    if not isinstance(obj, dict):
        raise KeyFileError(f"{where} is not a JSON key file")
    return obj


def _kdf(passphrase: bytes, salt: bytes) -> bytes:
    return bytes(
        nacl.pwhash.argon2id.kdf(
            nacl.secret.SecretBox.KEY_SIZE,
            passphrase,
            salt,
            opslimit=nacl.pwhash.argon2id.OPSLIMIT_MODERATE,
            memlimit=nacl.pwhash.argon2id.MEMLIMIT_MODERATE,
        )
    )


def read_passphrase(path: Path) -> bytes:
    try:
        data = read_small(path, 1 << 12, "passphrase file")
    except BadInput as e:
        raise KeyFileError(str(e)) from e
    data = data.rstrip(b"\r\n")
    if not data:
        raise KeyFileError(f"passphrase file {path} is empty")
    return data


def new_node_key(keydir: Path, name: str, passphrase: bytes | None = None) -> NodePublic:
    """Create ``<name>.key`` (0600) and ``<name>.pub`` in ``keydir``."""
    check_name(name)
    private_dir(keydir.parent, "ledger directory")  # LEDGER_HOME too: 0700 whatever the umask
    private_dir(keydir, "key directory")
    sk = nacl.signing.SigningKey.generate()
    seed = bytes(sk)
    pub = bytes(sk.verify_key)
    secret: dict[str, Any] = {"kind": KIND_SECRET, "name": name, "public_key": b64_encode(pub)}
    if passphrase is None:
        secret["seed"] = b64_encode(seed)
    else:
        salt = nacl.utils.random(nacl.pwhash.argon2id.SALTBYTES)
        box = nacl.secret.SecretBox(_kdf(passphrase, salt))
        secret["encrypted"] = {
            "kdf": "argon2id-moderate",
            "salt": b64_encode(salt),
            "box": b64_encode(bytes(box.encrypt(seed))),
        }
    pop = sk.sign(pop_message(name, pub)).signature
    public = NodePublic(name, pub, pop)
    key_path, pub_path = keydir / f"{name}.key", keydir / f"{name}.pub"
    if os.path.lexists(key_path):
        raise KeyFileError(f"{key_path} exists already; refusing to overwrite it")
    if os.path.lexists(pub_path) and not os.path.islink(pub_path):
        # a .pub without its .key is what a crash between the two writes leaves: the secret
        # was never stored, so the public half is void and is replaced
        os.unlink(pub_path)
    for stray in stale_temporaries(key_path) + stale_temporaries(pub_path):
        # what a `keys new` killed mid-write left: a secret of a key that never came to exist
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stray)
    # the public half first, the secret last: the secret file is what makes the key exist
    write_atomic(pub_path, public.to_bytes(), 0o644)
    write_atomic(key_path, (json.dumps(secret, indent=1) + "\n").encode(), 0o600)
    return public


def load_node_secret(
    keydir: Path, name: str, passphrase: bytes | None = None
) -> tuple[nacl.signing.SigningKey, NodePublic]:
    check_name(name)
    path = keydir / f"{name}.key"
    if not os.path.lexists(path):
        raise KeyFileError(f"no node key named {name!r} (looked for {path})")
    check_private_dir(keydir, "key directory")
    check_secret_file(path, "node key file")
    obj = _load_json(_read_key_file(path), str(path))
    if obj.get("kind") != KIND_SECRET:
        raise KeyFileError(f"{path} is not a kernel-ledger node secret key")
    if "seed" in obj:
        try:
            seed = b64_decode(str(obj["seed"]), 32, "key seed")
        except BadInput as e:
            raise KeyFileError(f"{path}: {e}") from e
    else:
        enc = obj.get("encrypted")
        if not isinstance(enc, dict):
            raise KeyFileError(f"{path} holds neither a seed nor an encrypted seed")
        if passphrase is None:
            raise KeyFileError(f"node key {name!r} is encrypted: give --passphrase-file")
        try:
            salt = b64_decode(str(enc["salt"]), 16, "salt")
            sealed = b64_decode(str(enc["box"]), what="sealed seed")
        except (KeyError, BadInput) as e:
            raise KeyFileError(f"{path}: encrypted seed is malformed ({e})") from e
        box = nacl.secret.SecretBox(_kdf(passphrase, salt))
        try:
            seed = bytes(box.decrypt(sealed))
        except nacl.exceptions.CryptoError as e:
            raise KeyFileError(f"wrong passphrase for node key {name!r}") from e
    if len(seed) != 32:
        raise KeyFileError(f"{path}: the seed is not 32 bytes")
    sk = nacl.signing.SigningKey(seed)
    pub_path = keydir / f"{name}.pub"
    public = NodePublic.from_bytes(_read_key_file(pub_path), str(pub_path))
    if bytes(sk.verify_key) != public.public:
        raise KeyFileError(f"{path} and {pub_path} hold different keys")
    return sk, public


def _read_key_file(path: Path) -> bytes:
    """A key file: a regular file of at most ``MAX_KEY_FILE`` bytes, read once, never through a
    symlink."""
    try:
        return read_small(path, MAX_KEY_FILE, "key file", follow_symlinks=False)
    except BadInput as e:
        raise KeyFileError(str(e)) from e
