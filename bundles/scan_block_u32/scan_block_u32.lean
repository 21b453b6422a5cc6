/-
  Proof obligations of kernels/scan_block_u32/scan_block_u32.cu (core Lean 4, no Mathlib).

  Model: block `b` of 256 threads, grid ceil_div(n, 256). Thread `t < 256` is lane `t % 32` of
  warp `t / 32 < 8` and owns element `256 b + t`. The warp scan has steps at offsets
  `o ∈ {1, 2, 4, 8, 16}`; lane `l` adds the value of lane `l - o` when `l ≥ o`. Lane 31 of warp
  `w` writes `warp_tot[w]` before the barrier; after it, thread `t` reads `warp_tot[k]`, `k < w`.
-/
namespace ScanBlockU32

/-- PO1 (disjointness): two threads of the grid with the same element are the same thread. -/
theorem index_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): the grid ceil_div(n, 256) holds the owner of every `i < n`. -/
theorem grid_covers (n i : Nat) (h : i < n) :
    i / 256 < (n + 255) / 256 ∧ (i / 256) * 256 + i % 256 = i := by
  omega

/-- PO2 (bounds): a thread of the grid has `256 b + t < n + 256`; the guards `i < n` cut the
  rest. The shuffle source `l - o` of a lane with `l ≥ o` is a lane of the same warp. -/
theorem guard_in_bounds (n b t l o : Nat) (hb : b < (n + 255) / 256) (ht : t < 256)
    (hl : l < 32) (ho : o ≤ l) : b * 256 + t < n + 256 ∧ l - o < 32 := by
  omega

/-- PO2 (bounds, shared): warps are `t / 32 < 8`, so `warp_tot[w]` and every `warp_tot[k]` with
  `k < w` are inside the 8 slots. -/
theorem shared_in_bounds (t k : Nat) (ht : t < 256) (hk : k < t / 32) : t / 32 < 8 ∧ k < 8 := by
  omega

/-- PO3 (convergence): the barrier is outside every branch: the 256 threads all arrive; and the
  shuffles are in a fixed 5-step loop, with every lane of the warp. -/
theorem barrier_all_arrive (s : Nat) (hs : s ≤ 256) : s + (256 - s) = 256 := by
  omega

/-- PO6 (initialised): slot `k` read after the barrier is written before it by thread
  `32 k + 31`, lane 31 of warp `k`, a thread of the block. -/
theorem slot_has_writer (k : Nat) (hk : k < 8) :
    32 * k + 31 < 256 ∧ (32 * k + 31) / 32 = k ∧ (32 * k + 31) % 32 = 31 := by
  omega

/-- PO7 (race freedom): the writers of distinct slots are distinct threads, and each writes
  once, before the barrier; after it the slots are only read. -/
theorem slot_writers_distinct (k₁ k₂ : Nat) (h : 32 * k₁ + 31 = 32 * k₂ + 31) : k₁ = k₂ := by
  omega

/-- PO8 (scan steps): the offsets 1, 2, 4, 8, 16 double from 1 to 16, the next (32) ends the
  loop, and they sum to 31: the Hillis-Steele steps reach back over the whole warp. -/
theorem scan_steps : 1 * 2 = 2 ∧ 2 * 2 = 4 ∧ 4 * 2 = 8 ∧ 8 * 2 = 16 ∧ ¬ (16 * 2 < 32) ∧
    1 + 2 + 4 + 8 + 16 = 31 := by
  decide

/-- PO5 (resources): `warp_tot` is 8 u32 = 32 bytes; 256 threads. -/
theorem resources_fit : 8 * 4 = 32 ∧ 32 ≤ 48 * 1024 ∧ 256 ≤ 1024 := by
  decide

end ScanBlockU32
