"""Loads and stores of raw bits in every state space, with the checks of SPEC 8 issue 4:
``out_of_bounds`` (global, shared, local), ``misaligned``, shared-memory races and
uninitialised reads, and per-element write tracking of "out"/"inout" buffers.

Addresses arrive as uint64 arrays (one per active thread, in the order of ``t``). A faulting
thread's load yields 0 and its store is dropped, so the run goes on and can find more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from verify.ptxsim.memory import LOCAL_GENERIC, SHARED_GENERIC, UINT, WINDOW

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine


def _check_align(m: Machine, addr: np.ndarray, align: int, t: np.ndarray, what: str) -> np.ndarray:
    if align <= 1:
        return np.ones(addr.shape, bool)
    ok = (addr & np.uint64(align - 1)) == 0  # align is a power of two
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        m.report("misaligned", f"{what} of {align} bytes at address {int(addr[i]):#x} by thread "
                 f"{{T{int(t[i])}}} at PTX line {m.line} is not {align}-byte aligned",
                 int(t[i]), int(addr[i]))
    return np.asarray(ok)


def _unwritten_read(m: Machine, b: Any, o: np.ndarray, w: int, t: np.ndarray,
                    atomic: bool) -> None:
    """A read of an element of an ``out`` buffer that nothing in this launch wrote yet: the
    buffer holds whatever the memory held before (the verifier's poison here, anything on a
    device), so the kernel depends on a value its contract does not give it."""
    if not m.out_undefined or b.intent != "out" or b.writer is None or b.atomic is None:
        return
    isz = b.itemsize
    per = max(1, (w + isz - 1) // isz)
    e = (o[:, None] // isz + np.arange(per)[None, :]).ravel()
    never = (b.writer[e] < 0) & ~b.atomic[e]
    if never.any():
        i = int(np.flatnonzero(never)[0])
        th = int(np.repeat(t, per)[i])
        how = "atomic read-modify-write" if atomic else f"global load of {w} bytes"
        m.report("uninitialised_read", f"{how} of element {int(e[i])} of output buffer "
                 f"'{b.name}' by thread {{T{th}}} at PTX line {m.line}, before anything in "
                 "the launch wrote it: an out buffer holds whatever memory held (declare it "
                 "inout if the kernel reads the caller's values)", th,
                 b.base + int(e[i]) * isz, key=("unwritten_read", b.name))


def same_value_writers(m: Machine, where: np.ndarray, t: np.ndarray, sv: np.ndarray,
                       what: str) -> np.ndarray:
    """Benign-race rule (issue 32): lanes of ONE warp storing the SAME value to one address in
    ONE instruction (``shared_sum[warp_id] = v`` after a butterfly reduction; Triton emits it
    after every cross-warp reduction) make one write land whatever the order, so they are not a
    race: the rows of such a group but its first lane are dropped (the indices of the rows kept
    are returned) and a note names the group. Lanes of several warps, or different values, stay
    for the race detector. ``where`` is a per-row address key (shared byte index, or buffer
    element), ``sv`` the stored values, ``what`` a format string naming one address."""
    keep_all = np.arange(where.size)
    if where.size < 2 or bool((where[1:] > where[:-1]).all()):  # the common case: all distinct
        return keep_all
    order = np.lexsort((t, where))
    ws = where[order]
    first = np.ones(ws.size, bool)
    first[1:] = ws[1:] != ws[:-1]
    if first.all():
        return keep_all
    starts = np.flatnonzero(first)
    grp = np.cumsum(first) - 1
    lead = order[starts][grp]
    same = ((t[order] >> 5) == (t[lead] >> 5)) & (sv[order] == sv[lead])
    benign = np.logical_and.reduceat(same, starts)
    size = np.diff(np.append(starts, ws.size))
    shown = np.flatnonzero(benign & (size > 1))
    if shown.size == 0:
        return keep_all
    g = int(shown[0])
    lt = t[order[starts[shown]]]
    nb = np.unique(m.block_of[lt]).size
    m.note(f"benign_store: {what.format(int(ws[starts[g]]))} written with the same value by "
           f"{int(size[g])} lanes of one warp (thread {{T{int(lt[0])}}} and the next) in one "
           f"instruction at PTX line {m.line}: one write lands whatever their order, so it is "
           "not a race" + (f" ({shown.size} such addresses, each by one warp, in {nb} block(s))"
                           if shown.size > 1 else ""))
    keep = first | ~benign[grp]
    return np.sort(order[keep])


def _global(m: Machine, addr: np.ndarray, w: int, t: np.ndarray, align: int,
            store: Any = None, atomic: bool = False, reads: bool = True) -> np.ndarray | None:
    what = "store" if store is not None else "load"
    ok = _check_align(m, addr, align, t, f"global {what}")
    k, off = m.g.split(addr, w)
    bad = (k < 0) & ok
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        m.report("out_of_bounds", f"global {what} of {w} bytes at address {int(addr[i]):#x} "
                 f"({m.g.describe(int(addr[i]))}) by thread {{T{int(t[i])}}} at PTX line "
                 f"{m.line}", int(t[i]), int(addr[i]))
    k = np.where(ok, k, -1)
    out = np.zeros(addr.shape, UINT[w]) if store is None else None
    if k.size == 0:
        return out
    kmin, kmax = int(k.min()), int(k.max())
    ks = [kmin] if kmin == kmax else [int(x) for x in np.unique(k)]
    for kk in ks:
        if kk < 0:
            continue
        b = m.g.bufs[kk]
        sel = slice(None) if kmin == kmax else (k == kk)
        o = off[sel]
        if store is not None and b.intent == "const":
            i = int(np.flatnonzero(k == kk)[0])
            m.report("out_of_bounds", f"global store of {w} bytes at address {int(addr[i]):#x} "
                     f"(byte offset {int(off[i])} of constant variable '{b.name}') by thread "
                     f"{{T{int(t[i])}}} at PTX line {m.line}: constant memory is read-only",
                     int(t[i]), int(addr[i]))
            continue
        if store is None and reads:
            _unwritten_read(m, b, o, w, t[sel], atomic)
        if not (o & (w - 1)).any():
            view = b.u8[: b.size - b.size % w].view(UINT[w])
            if store is None:
                assert out is not None
                out[sel] = view[o // w]
            else:
                sv = np.broadcast_to(np.asarray(store), addr.shape)[sel]
                if m.prio is not None:  # second schedule: stores of one instruction land in
                    po = np.argsort(m.prio[t[sel]], kind="stable")  # the seeded thread order
                    view[(o // w)[po]] = sv[po]
                else:
                    view[o // w] = sv
        else:  # aligned to the access but not to the element size: go byte by byte
            byts = o[:, None] + np.arange(w)[None, :]
            if store is None:
                assert out is not None
                out[sel] = b.u8[byts].copy().view(UINT[w]).reshape(-1)
            else:
                sv = np.ascontiguousarray(np.broadcast_to(np.asarray(store), addr.shape)[sel])
                b.u8[byts] = sv.view(np.uint8).reshape(-1, w)
        tk = t[sel]
        if store is not None:
            if not atomic and o.size > 1:  # lanes of one warp storing one value: one write
                k = same_value_writers(m, o, tk, np.broadcast_to(np.asarray(store), addr.shape)[
                    sel], "byte offset {} of buffer '" + b.name.replace("{", "").replace(
                        "}", "") + "'")
                o, tk = o[k], tk[k]
            m.g.note_writes(b, o, w, tk, atomic, m.report, m.line)
            if m.cp_pending and not atomic:
                m.check_copy_sources(b.base + o, w, tk)
        if m.tracking and (store is not None or not atomic):
            m.g.track_race(b, o, w, tk, store is not None, m.block_of, m.bar_epoch, m.line,
                           m.report, atomic)
    return out


def _shared(m: Machine, saddr: np.ndarray, w: int, t: np.ndarray, align: int,
            store: Any = None, atomic: bool = False, track: bool = True) -> np.ndarray | None:
    sh = m.shared
    what = "store" if store is not None else "load"
    size = m.shared_size
    ok = _check_align(m, saddr, align, t, f"shared {what}")
    inb = saddr + np.uint64(w) <= np.uint64(size)
    bad = ~inb & ok
    if bad.any() or sh is None:
        i = int(np.flatnonzero(bad)[0]) if bad.any() else 0
        m.report("out_of_bounds", f"shared {what} of {w} bytes at shared address "
                 f"{int(saddr[i]):#x} by thread {{T{int(t[i])}}} at PTX line {m.line}: the block "
                 f"has {size} bytes of shared memory", int(t[i]), int(saddr[i]))
    good = ok & inb
    out = np.zeros(saddr.shape, UINT[w]) if store is None else None
    if sh is None:
        return out
    if not good.all():
        saddr, t2 = saddr[good], t[good]
        sv = None if store is None else np.broadcast_to(np.asarray(store), good.shape)[good]
        r = _shared(m, saddr, w, t2, align, sv, atomic, track)
        if out is not None and r is not None:
            out[good] = r
        return out
    flat = m.block_of[t] * sh.stride + saddr.astype(np.int64)
    if store is None:
        if track:
            sh.track_read(flat, w, t, m.line, m.report)
        elif atomic:
            sh.check_init(flat, w, t, m.line, m.report)
        if w <= 8 and not (flat & (w - 1)).any():
            res: np.ndarray = sh.data.view(UINT[w])[flat // w]
            return res
        byts = flat[:, None] + np.arange(w)[None, :]
        return np.ascontiguousarray(sh.data[byts]).view(UINT[w]).reshape(-1)
    sv = np.broadcast_to(np.asarray(store).astype(UINT[w]), saddr.shape)
    if track:
        k = slice(None) if atomic or flat.size < 2 else same_value_writers(
            m, flat, t, sv, "shared byte {{S{}}}")
        sh.track_write(flat[k], w, t[k], m.line, m.report, atomic=atomic)
    if m.prio is not None and flat.size > 1:  # second schedule: the seeded thread order
        po = np.argsort(m.prio[t], kind="stable")
        flat, sv = flat[po], sv[po]
    if not (flat & (w - 1)).any():
        sh.data.view(UINT[w])[flat // w] = sv
    else:
        sh.data[flat[:, None] + np.arange(w)[None, :]] = np.ascontiguousarray(sv).view(
            np.uint8).reshape(-1, w)
    return None


def _local(m: Machine, laddr: np.ndarray, w: int, t: np.ndarray, align: int,
           store: Any = None) -> np.ndarray | None:
    size = m.local_size
    what = "store" if store is not None else "load"
    ok = _check_align(m, laddr, align, t, f"local {what}")
    inb = (laddr + np.uint64(w) <= np.uint64(size)) & ok
    if not inb.all():
        i = int(np.flatnonzero(~inb & ok)[0]) if (~inb & ok).any() else 0
        if (~inb & ok).any():
            m.report("out_of_bounds", f"local {what} of {w} bytes at local address "
                     f"{int(laddr[i]):#x} by thread {{T{int(t[i])}}} at PTX line {m.line}: the "
                     f"thread has {size} bytes of local memory", int(t[i]), int(laddr[i]))
    out = np.zeros(laddr.shape, UINT[w]) if store is None else None
    if m.local is None or not inb.any():
        return out
    flat = t[inb] * size + laddr[inb].astype(np.int64)
    byts = flat[:, None] + np.arange(w)[None, :]
    ever = m.local_ever
    if store is None:
        assert out is not None
        if ever is not None:
            ev = ever[byts].all(axis=1)
            if not ev.all():
                i = int(np.flatnonzero(~ev)[0])
                ti = int(t[inb][i])
                m.report("uninitialised_read", f"local load of {w} bytes at local address "
                         f"{int(laddr[inb][i]):#x} by thread {{T{ti}}} at PTX line {m.line} "
                         "reads bytes this thread never stored", ti, int(laddr[inb][i]))
        out[inb] = np.ascontiguousarray(m.local[byts]).view(UINT[w]).reshape(-1)
        return out
    if ever is not None:
        ever[byts] = True
    sv = np.ascontiguousarray(np.broadcast_to(np.asarray(store).astype(UINT[w]),
                                              laddr.shape)[inb])
    m.local[byts] = sv.view(np.uint8).reshape(-1, w)
    return None


def access(m: Machine, space: str, addr: Any, w: int, t: np.ndarray, align: int,
           store: Any = None, atomic: bool = False, track: bool = True,
           reads: bool = True) -> np.ndarray | None:
    """Load (store is None) or store ``w`` bytes per thread in ``space``. ``reads=False``: the
    load of an ``atom.exch``, whose new value does not depend on the old one, so reading an
    unwritten output element there is no finding."""
    addr = np.broadcast_to(np.asarray(addr, np.uint64), t.shape)
    if space == "global":
        return _global(m, addr, w, t, align, store, atomic, reads)
    if space == "shared":
        return _shared(m, addr, w, t, align, store, atomic, track)
    if space == "local":
        return _local(m, addr, w, t, align, store)
    # generic: split by window
    sh = (addr >= np.uint64(SHARED_GENERIC)) & (addr < np.uint64(SHARED_GENERIC + WINDOW))
    lo = (addr >= np.uint64(LOCAL_GENERIC)) & (addr < np.uint64(LOCAL_GENERIC + WINDOW))
    gl = ~(sh | lo)
    if gl.all():
        return _global(m, addr, w, t, align, store, atomic, reads)
    out = np.zeros(addr.shape, UINT[w]) if store is None else None
    sv = None if store is None else np.broadcast_to(np.asarray(store), addr.shape)
    for sel, sp, base in ((gl, "global", 0), (sh, "shared", SHARED_GENERIC),
                          (lo, "local", LOCAL_GENERIC)):
        if not sel.any():
            continue
        a = addr[sel] - np.uint64(base)
        r = access(m, sp, a, w, t[sel], align, None if sv is None else sv[sel], atomic, track,
                   reads)
        if out is not None and r is not None:
            out[sel] = r
    return out
