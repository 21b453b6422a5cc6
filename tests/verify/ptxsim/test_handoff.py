"""Hand-off between blocks through a fence and an atomic (verify/ptxsim/handoff.py): the CUDA
sample's "last block sums the partials" (tests/fixtures/handoff/handoff.cu, real nvcc output)
runs clean with the exact sum, and each way of getting it wrong is still a ``global_race``:
no fence, the fence after the ticket, a cta-scope fence or atomic, the wrong block summing, a
read that does not wait for its ticket. The model's pure rules are checked on ``HandOff``
directly."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from verify.ptxsim import Buffer, Module, Scalar, SimResult, launch, load_module
from verify.ptxsim.handoff import HandOff, scope_counts
from verify.tools import find_tool

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "handoff"
NVCC = find_tool("nvcc", cuda=True)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc: cannot build the kernels' PTX")
THREADS = 128  # the fixture's block size (its shared arrays are sized for it)


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    """nvcc -arch=sm_86 -ptx of tests/fixtures/handoff/handoff.cu."""
    assert NVCC is not None
    out = tmp_path_factory.mktemp("handoff") / "handoff.ptx"
    subprocess.run([NVCC, "-arch=sm_86", "-ptx", "-o", str(out), str(FIX / "handoff.cu")],
                   check=True, capture_output=True)
    return out.read_text()


@pytest.fixture(scope="module")
def mod(ptx: str) -> Module:
    return load_module(ptx)


def kinds(r: SimResult) -> list[str]:
    return [f.kind for f in r.findings]


def run_sum(m: Module, entry: str, nb: int, seed: int | None = None) -> tuple[
        SimResult, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``entry`` over ``nb`` blocks; the last block is partial when nb > 2. Returns the result,
    x, part, out and the counter buffer (used only by sum_last_counter)."""
    n = nb * THREADS - (37 if nb > 2 else 0)
    x = (np.arange(n) % 13).astype(np.float32)  # integer sums: exact in any order
    part = np.zeros(nb, np.float32)
    out = np.full(1, np.nan, np.float32)
    counter = np.zeros(1, np.uint32)
    args: list[Buffer | Scalar] = [Buffer(x, "in", "x"), Buffer(part, "out", "part"),
                                   Buffer(out, "out", "out")]
    if entry == "sum_last_counter":
        args.append(Buffer(counter, "inout", "counter"))
    args.append(Scalar(n, ".s32"))
    r = launch(m, entry, (nb, 1, 1), (THREADS, 1, 1), args, schedule_seed=seed)
    return r, x, part, out, counter


# ---------------------------------------------------------------- the correct pattern


@needs_nvcc
@pytest.mark.parametrize("entry", ["sum_last", "sum_last_block", "sum_last_counter"])
@pytest.mark.parametrize("nb", [1, 2, 7, 33])
def test_last_block_sums_the_partials(mod: Module, entry: str, nb: int) -> None:
    r, x, part, out, counter = run_sum(mod, entry, nb)
    assert r.findings == ()
    padded = np.zeros(nb * THREADS, np.float32)
    padded[: x.size] = x
    assert np.array_equal(part, padded.reshape(nb, THREADS).sum(axis=1))
    assert out[0] == x.sum()
    assert counter[0] == 0  # reset by the last block (sum_last_counter; unused elsewhere)


@needs_nvcc
@pytest.mark.parametrize("entry", ["sum_last", "sum_last_block"])
def test_last_block_under_a_second_schedule(mod: Module, entry: str) -> None:
    """Another ticket order: another block draws the last ticket and sums; still clean."""
    for seed in (1, 2, 3):
        r, x, _, out, _ = run_sum(mod, entry, 7, seed)
        assert r.findings == ()
        assert out[0] == x.sum()


@needs_nvcc
@pytest.mark.parametrize("fence", ["fence.acq_rel.gpu", "fence.sc.gpu", "membar.sys",
                                   "fence.sc.sys"])
def test_other_gpu_and_sys_fences_hand_off(ptx: str, fence: str) -> None:
    assert ptx.count("membar.gl;") == 6
    r, x, _, out, _ = run_sum(load_module(ptx.replace("membar.gl;", fence + ";")), "sum_last", 7)
    assert r.findings == ()
    assert out[0] == x.sum()


@needs_nvcc
def test_release_atomic_needs_no_separate_fence(ptx: str) -> None:
    """``atom.release.gpu`` (``atom.acq_rel``) is the release pattern by itself."""
    for sem in ("release", "acq_rel"):
        text = ptx.replace("membar.gl;", "").replace(
            "atom.global.inc.u32", f"atom.{sem}.gpu.global.inc.u32")
        r, x, _, out, _ = run_sum(load_module(text), "sum_last", 7)
        assert r.findings == ()
        assert out[0] == x.sum()


# ---------------------------------------------------------------- real bugs stay races


def _race_on_part(r: SimResult) -> str:
    assert "global_race" in kinds(r)
    msg = next(f.message for f in r.findings if f.kind == "global_race")
    assert "of buffer 'part' read by thread" in msg
    assert "from another block of the same launch" in msg
    return msg


@needs_nvcc
@pytest.mark.parametrize("nb", [2, 7])
def test_missing_fence_is_a_race(mod: Module, nb: int) -> None:
    r, x, _, out, _ = run_sum(mod, "sum_nofence", nb)
    msg = _race_on_part(r)
    assert f"read by thread (block ({nb - 1}, 0, 0), thread (0, 0, 0))" in msg
    assert out[0] == x.sum()  # the interpreter's one memory hides the bug from the values
    r, _, _, _, _ = run_sum(mod, "sum_nofence", 1)  # one block: nothing crosses blocks
    assert r.findings == ()


@needs_nvcc
def test_fence_after_the_ticket_is_a_race(mod: Module) -> None:
    _race_on_part(run_sum(mod, "sum_fence_after", 7)[0])


@needs_nvcc
@pytest.mark.parametrize("change", [("membar.gl;", "membar.cta;"),
                                    ("membar.gl;", "fence.sc.cta;"),
                                    ("atom.global.inc", "atom.cta.global.inc")])
def test_cta_scope_orders_nothing_across_blocks(ptx: str, change: tuple[str, str]) -> None:
    _race_on_part(run_sum(load_module(ptx.replace(*change)), "sum_last", 7)[0])


@needs_nvcc
def test_reading_a_partial_not_yet_handed_off(mod: Module) -> None:
    """The block with ticket gridDim.x - 2 sums: block 6 takes its ticket after it, so its
    partial is not ordered before the read (the value is right only by this schedule)."""
    r, _, _, _, _ = run_sum(mod, "sum_early", 7)
    msg = _race_on_part(r)
    assert msg.startswith("global_race: element 6 of buffer 'part' read by thread "
                          "(block (5, 0, 0), thread (0, 0, 0))")
    assert "written by thread (block (6, 0, 0), thread (0, 0, 0))" in msg
    assert "not ordered by a fence and an atomic hand-off" in msg
    assert "element 0 of buffer 'count' written by thread (block (5, 0, 0)" in r.findings[1].message
    r, _, _, out, _ = run_sum(mod, "sum_early", 1)  # no block draws ticket -1
    assert kinds(r) == ["unwritten"] and np.isnan(out[0])


@needs_nvcc
def test_read_that_ignores_the_ticket_is_caught_by_the_second_schedule(mod: Module) -> None:
    """Each block reads its predecessor's partial after its own ticket, whatever it drew. In
    thread order the predecessor always took its ticket first, so the first run sees an
    ordered hand-off (a happens-before detector judges the order it ran); the second
    schedule takes the tickets in another order and tracks races again."""
    nb = 7
    n = nb * THREADS
    x = (np.arange(n) % 13).astype(np.float32)

    def go(seed: int | None) -> SimResult:
        part, prev = np.zeros(nb, np.float32), np.zeros(nb, np.float32)
        return launch(mod, "prev_partial", (nb, 1, 1), (THREADS, 1, 1),
                      [Buffer(x, "in", "x"), Buffer(part, "out", "part"),
                       Buffer(prev, "out", "prev"), Scalar(n, ".s32")], schedule_seed=seed)
    assert go(None).findings == ()
    r = go(1)
    assert kinds(r) == ["global_race"]
    assert "of buffer 'part' read by thread" in r.findings[0].message


# ---------------------------------------------------------------- the model's rules


def test_scopes_that_count() -> None:
    assert scope_counts(["membar", "gl"]) and scope_counts(["membar", "sys"])
    assert not scope_counts(["membar", "cta"])
    assert scope_counts(["fence", "sc", "gpu"]) and scope_counts(["fence", "acq_rel", "sys"])
    assert not scope_counts(["fence", "sc", "cta"])
    assert not scope_counts(["fence", "acq_rel", "cluster"])
    assert scope_counts(["atom", "global", "add", "u32"])  # gpu scope by default
    assert not scope_counts(["atom", "cta", "global", "add", "u32"])


def addrs(*a: int) -> np.ndarray:
    return np.array(a, np.uint64)


def test_one_counter_chain() -> None:
    """Blocks 0..3 fence once and take tickets in order: each acquires its predecessors."""
    hb = HandOff(5)
    hb.fence(np.arange(4))
    hb.atomic(np.arange(4), addrs(64, 64, 64, 64), acquire=True)
    assert hb.clock(3).tolist() == [1, 1, 1, 1, -1]
    assert hb.clock(1).tolist() == [1, 1, -1, -1, -1]
    assert hb.clock(4).tolist() == [-1] * 5  # no event: nothing acquired
    # stamp 0 (before the fence) is ordered; stamp 1 (after it) is not
    ordered = hb.ordered(np.array([0, 0, 2]), np.array([0, 1, 0], np.int32), np.array([3, 3, 1]))
    assert ordered.tolist() == [True, False, False]


def test_red_releases_but_does_not_acquire() -> None:
    hb = HandOff(2)
    hb.fence(np.array([0, 1]))
    hb.atomic(np.array([0]), addrs(8), acquire=False)  # red by block 0, then atom by block 1
    hb.atomic(np.array([1]), addrs(8), acquire=True)
    assert hb.clock(1)[0] == 1
    hb.atomic(np.array([0]), addrs(16), acquire=True)  # atom by block 0, then red by block 1
    hb.atomic(np.array([1]), addrs(16), acquire=False)
    assert hb.clock(0)[1] == -1
    # a red between the release and the acquire does not break the chain (release sequence)
    hb2 = HandOff(3)
    hb2.fence(np.array([0]))
    hb2.atomic(np.array([0, 1]), addrs(8, 8), acquire=False)
    hb2.atomic(np.array([2]), addrs(8), acquire=True)
    assert hb2.clock(2).tolist() == [1, 0, 0]


def test_chains_through_two_addresses_and_the_cache() -> None:
    hb = HandOff(3)
    hb.fence(np.array([0]))
    hb.atomic(np.array([0, 1]), addrs(8, 8), acquire=True)  # 0 -> 1 through address 8
    assert hb.clock(2).tolist() == [-1, -1, -1]
    hb.fence(np.array([1]))
    hb.atomic(np.array([1, 2]), addrs(24, 24), acquire=True)  # 1 -> 2 through address 24
    assert hb.clock(2).tolist() == [1, 1, 0]  # cached clock dropped: block 2 had a new event
    # later events of other blocks do not reach back
    hb.fence(np.array([0]))
    hb.atomic(np.array([0]), addrs(24), acquire=True)
    assert hb.clock(2).tolist() == [1, 1, 0]
