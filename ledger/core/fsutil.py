"""Files the ledger writes and small files it reads: one atomic writer, private directories,
bounded reads (issue 9, items 2, 22, 25).

* ``write_atomic``: a temporary file made by ``tempfile.mkstemp`` in the target's own directory
  (``O_CREAT | O_EXCL | O_NOFOLLOW``, a random name, mode 0600 from birth), written, fsynced,
  given its final mode, renamed over the target, then the directory fsynced. A symlink planted at
  any name is never followed; a crash leaves the old file or the new one, and at worst a stray
  ``.<name>.*.tmp`` that nothing reads. ``exclusive`` refuses to replace an existing target (key
  files), and the check is made again at the rename with ``link`` + ``unlink`` so a file that
  appears meanwhile is not overwritten either.
  ``stale_temporaries`` lists the strays a killed writer left for a name, for a caller that
  removes them (``ledger keys new``: a stray of a key file holds a secret).
* ``write_atomic_at``: the same for a name in a directory held open (``dir_fd``): ``ledger
  publish`` writes beneath its destination without following a symlink at any level.
* ``private_dir``: a directory made (or found) with mode 0700 whatever the umask (missing parents
  are made without group or other write permission), refused when it is a symlink, not owned by
  this user, or writable by group or others; a ledger (witness) directory is refused too when its
  secret key file ``log.key`` (``witness.key``) is unsafe (``check_secret_file``).
* ``check_secret_file``: a key file must be a regular file (not a symlink, FIFO or device) of
  this user that group and others can neither read nor write (as ssh refuses such a key).
* ``read_small``: a small file read with a byte limit (a regular file judged by its size first;
  a pipe or ``/dev/zero`` never read past the limit), refused with one ``BadInput`` line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from pathlib import Path

from ledger.core.errors import BadInput, KeyFileError

# Fault injection for the crash/disk-full campaign (scripts/fault_campaign.py): when set to
# "<n>", the n-th ``write_atomic`` call of the process fails with ENOSPC after writing half of
# its data, exactly as a full disk would. Never set in normal use.
_FAULT_ENV = "LEDGER_FAULT_WRITE_ENOSPC"
_writes = 0


def _maybe_fault(fd: int, data: bytes) -> None:
    global _writes
    spec = os.environ.get(_FAULT_ENV)
    if not spec:
        return
    _writes += 1
    if spec.isdigit() and int(spec) == _writes:
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device (injected)")


def _fill(fd: int, data: bytes, mode: int, fsync: bool) -> None:
    """Write all of ``data`` to the new file ``fd``, give it ``mode``, fsync it when ``fsync``,
    close it (also on failure)."""
    try:
        _maybe_fault(fd, data)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fchmod(fd, mode)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path, data: bytes, mode: int = 0o644, exclusive: bool = True, fsync: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically: temporary file in the same directory, fsync, rename,
    fsync the directory. Raise ``KeyFileError`` when ``exclusive`` and ``path`` exists, and
    ``BadInput`` naming the file when the write itself fails (disk full, no permission)."""
    parent = path.parent
    if exclusive and os.path.lexists(path):
        raise KeyFileError(f"{path} exists already; refusing to overwrite it")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror}") from e
    try:
        _fill(fd, data, mode, fsync)
        if exclusive:
            # link() fails with EEXIST instead of replacing a file that appeared meanwhile
            try:
                os.link(tmp, path, follow_symlinks=False)
            except FileExistsError as e:
                raise KeyFileError(f"{path} exists already; refusing to overwrite it") from e
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, FileExistsError):
            raise BadInput(f"cannot write {path}: {e.strerror or e}") from e
        raise
    if fsync:
        fsync_dir(parent)


def stale_temporaries(path: Path) -> list[Path]:
    """The ``.<name>.*.tmp`` files ``write_atomic`` left beside ``path`` when its process was
    killed between writing and renaming: regular files of this user, never symlinks."""
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if entry.name.startswith(f".{path.name}.") and entry.name.endswith(".tmp"):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                    out.append(Path(entry.path))
    return out


def write_atomic_at(
    dir_fd: int, name: str, data: bytes, mode: int = 0o644, fsync: bool = True, shown: str = ""
) -> None:
    """``write_atomic`` (replacing) of ``name`` in the directory open as ``dir_fd``: a temporary
    ``.<name>.<random>.tmp`` made there with ``O_CREAT | O_EXCL | O_NOFOLLOW``, written, given
    ``mode``, fsynced when ``fsync``, renamed over ``name`` (a symlink or hard link planted at
    ``name`` is replaced, never written through). ``shown`` names the file in messages."""
    where = shown or name
    if "/" in name or name in ("", ".", ".."):
        raise BadInput(f"cannot write {where}: not a plain file name")
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    except OSError as e:
        raise BadInput(f"cannot write {where}: {e.strerror or e}") from e
    try:
        _fill(fd, data, mode, fsync)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(e, OSError):
            raise BadInput(f"cannot write {where}: {e.strerror or e}") from e
        raise
    if fsync:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def check_private_dir(
    directory: Path, what: str = "ledger directory", lstat: os.stat_result | None = None
) -> None:
    """Refuse a directory that is a symlink, is not a directory, belongs to another user, or that
    group or others may write (they could swap the files the ledger trusts). ``lstat``: its
    ``os.lstat`` when the caller has just taken it (None: taken here)."""
    try:
        st = os.lstat(directory) if lstat is None else lstat
    except OSError as e:
        raise BadInput(f"{directory}: cannot use {what} ({e.strerror})") from e
    if stat.S_ISLNK(st.st_mode):
        # a symlinked LEDGER_HOME is allowed when its target passes the same checks
        try:
            st = os.stat(directory)
        except OSError as e:
            raise BadInput(f"{directory}: cannot use {what} ({e.strerror})") from e
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{directory}: {what} is not a directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise BadInput(f"{directory}: {what} belongs to another user (uid {st.st_uid})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise BadInput(
            f"{directory}: {what} is writable by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); run `chmod go-w {directory}`"
        )
    secret = SECRET_FILES.get(what)
    if secret is not None:
        check_secret_file(directory / secret[0], secret[1])


# the secret key file each kind of private directory holds, checked with the directory
SECRET_FILES = {
    "ledger directory": ("log.key", "log key file"),
    "witness directory": ("witness.key", "witness key file"),
}


def check_secret_file(path: Path, what: str = "key file") -> None:
    """Refuse a key file that is a symlink (to anything: another file, ``/dev/zero``), not a
    regular file (a FIFO, a device), another user's, or that group or others may read or write
    (its secret may have been read: like ssh, the key is not used). A missing file passes (the
    caller says what is missing). ``KeyFileError`` (exit 2) naming the fix; the file is not read."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as e:
        raise KeyFileError(f"cannot use {what} {path}: {getattr(e, 'strerror', None) or e}") from e
    if stat.S_ISLNK(st.st_mode):
        raise KeyFileError(f"{what} {path} is a symlink: a key file must be a regular file "
                           "(refusing to follow it)")
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"{what} {path} is not a regular file")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise KeyFileError(f"{what} {path} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"{what} {path} is accessible by group or others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}): its secret may have been read; if it was not, "
            f"run `chmod 600 {path}`"
        )


def private_dir(directory: Path, what: str = "ledger directory") -> Path:
    """Make ``directory`` (and missing parents) with mode 0700 whatever the umask; refuse an
    existing one that others could write (``check_private_dir``)."""
    try:
        st: os.stat_result | None = os.lstat(directory)
    except (OSError, ValueError):  # as os.path.lexists: missing (or unreachable), made below
        st = None
    if st is None:
        try:
            make_parents(directory)
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise BadInput(f"{directory}: cannot create {what} ({e.strerror})") from e
        else:
            os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
    check_private_dir(directory, what, st)
    return directory


def make_parents(path: Path) -> None:
    """Make the missing directories above ``path`` without group or other write permission,
    whatever the umask (under umask 000 ``mkdir -p`` would make them 0777: anyone could then
    swap the directory below for their own)."""
    missing: list[Path] = []
    parent = path.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            continue
        os.chmod(d, stat.S_IMODE(os.lstat(d).st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))


def read_small(
    path: Path, limit: int, what: str = "file", follow_symlinks: bool = True
) -> bytes:
    """Read a file of at most ``limit`` bytes; anything larger, or unreadable, is ``BadInput``.
    A regular file is judged by its size before a byte is read; anything else (a pipe from
    ``<(...)``, ``/dev/zero``) is read with the limit and refused past it, never read to its end.
    ``follow_symlinks=False``: a symlink at ``path`` is refused, not read through.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_symlinks:
            raise BadInput(f"{what} {path} is a symlink: refusing to read through it") from e
        raise BadInput(f"cannot read {what} {path}: {e.strerror}") from e
    except ValueError as e:  # a NUL in the path
        raise BadInput(f"cannot read {what} {path!r}: {e}") from e
    return read_open(fd, f"{what} {path}", limit)


def read_open(fd: int, shown: str, limit: int, regular_only: bool = False) -> bytes:
    """``read_small`` of a file already open (non-blocking) as ``fd``, which it closes:
    ``shown`` names it in messages; ``regular_only`` refuses anything but a regular file (a
    pipe, a device)."""
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BadInput(f"{shown} is a directory")
        if regular_only and not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{shown} is not a regular file")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise BadInput(f"{shown} is larger than {limit} bytes")
        if not stat.S_ISREG(st.st_mode):
            os.set_blocking(fd, True)  # a pipe: wait for its writer, still bounded below
        data = read_fd_bounded(fd, limit)
    except OSError as e:
        raise BadInput(f"cannot read {shown}: {e.strerror or e}") from e
    finally:
        os.close(fd)
    if len(data) > limit:
        raise BadInput(f"{shown} is larger than {limit} bytes")
    return data


def read_fd_bounded(fd: int, limit: int, chunk_size: int = 1 << 16) -> bytes:
    """Read from ``fd`` to its end or to ``limit + 1`` bytes, whichever comes first (so a caller
    sees "more than the limit" without reading an endless source to its end); OSError passes."""
    chunks: list[bytes] = []
    got = 0
    while got <= limit:
        chunk = os.read(fd, min(chunk_size, limit + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
