"""``match.any.sync`` and ``match.all.sync`` (``__match_any_sync``, ``__match_all_sync``;
PTX ISA "Parallel Synchronization and Communication Instructions: match.sync").

The lanes of one warp that pass the same ``membermask`` match together (like ``vote`` and
``redux``, ``verify.ptxsim.ops_warp._mask_groups``). The instruction waits until every
non-exited lane named in ``membermask`` executes it (``_check_members``: the group is parked
until they come), so the lanes present are exactly the non-exited members. The ISA's modes:

* ``.any``: ``d`` is the mask of the members whose ``a`` equals this lane's ``a``;
* ``.all``: ``d`` is the mask of the members when all of them hold the same ``a``, else 0; the
  optional predicate ``p`` says whether they all agree.

Values are compared as bits (``.b32`` / ``.b64``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from verify.ptxsim.ops_warp import _active, _check_members, _mask_groups
from verify.ptxsim.parser import PredDst
from verify.ptxsim.program import Ctx, Fn
from verify.ptxsim.values import Idx, unsupported

if TYPE_CHECKING:
    from verify.ptxsim.machine import Machine


def lane_masks(group: np.ndarray, lane: np.ndarray, ngroups: int) -> np.ndarray:
    """Per group id (0..ngroups-1), the 32-bit mask of the lanes in it (lanes are distinct
    within a group, so the float64 sum of 2^lane is exact)."""
    w = 2.0 ** lane.astype(np.float64)
    return np.bincount(group, weights=w, minlength=ngroups).astype(np.uint64).astype(np.uint32)


def match(ctx: Ctx) -> Fn:
    ins = ctx.ins
    parts = ins.parts
    if len(parts) != 4 or parts[1] not in ("any", "all") or parts[2] != "sync" or \
            parts[3] not in ("b32", "b64"):
        raise unsupported(ins)
    mode, t = parts[1], "." + parts[3]
    ops = ins.operands
    dst = ops[0]
    pset = None
    if isinstance(dst, PredDst):
        if mode != "all":
            raise unsupported(ins, "a predicate destination needs match.all")
        pset = ctx.set(dst.pred, ".pred")
        dst = dst.reg
    d = ctx.set(dst, ".b32")
    a, mk = ctx.get(ops[1], t), ctx.get(ops[2], ".u32")

    def fn(m: Machine, idx: Idx) -> None:
        tids = m.all_idx(idx)
        maskv = mk(m, idx)
        _check_members(m, tids, maskv, _active(m, tids), "match.sync")
        _, grp = _mask_groups(tids, maskv)
        lane = tids & 31
        v = np.broadcast_to(np.asarray(a(m, idx)), tids.shape).astype(np.uint64)
        ngroups = int(grp.max()) + 1 if grp.size else 0
        members = lane_masks(grp, lane, ngroups)
        _, cls = np.unique(np.stack([grp.astype(np.uint64), v], axis=1), axis=0,
                           return_inverse=True)
        cls = cls.reshape(-1)
        same = lane_masks(cls, lane, int(cls.max()) + 1 if cls.size else 0)[cls]
        if mode == "any":
            d(m, idx, same)
            return
        agree = same == members[grp]
        d(m, idx, np.where(agree, members[grp], np.uint32(0)))
        if pset is not None:
            pset(m, idx, agree)
    return fn
