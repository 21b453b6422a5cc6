/-
  Proof obligations of kernels/gemm_mma/gemm_mma.cu (core Lean 4, no Mathlib).

  Model: block tile 32 × 32, k step 16, 4 warps in a 2 × 2 grid of 16 × 16 warp tiles, each two
  m16n8 accumulators. In an m16n8 accumulator lane `l` (group `g = l / 4`, `tg = l % 4`) holds
  elements `(g + 8 h, 2 tg + i)` for `h, i < 2`. Thread `tid < 64` copies 16 bytes (8 halves) of
  the A tile, chunk `tid` = row `tid / 2`, column `8 (tid % 2)`; thread `64 + c` chunk `c` of the
  B tile, row `c / 4`, column `8 (c % 4)`. Step `kt` computes from stage `kt % 2` while the
  copies of step `kt + 1` fill stage `(kt + 1) % 2`.
  Sizes: `m % 32 = 0`, `n % 32 = 0`, `k % 16 = 0`.
-/
namespace GemmMma

/-- Row-major addressing stays inside an `R × C` matrix, for a run of `w` elements. -/
theorem row_major_run_in_bounds (R C r c w : Nat) (hr : r < R) (hc : c + w ≤ C) :
    r * C + c + w ≤ R * C := by
  have h1 : r * C + c + w ≤ (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- PO1 (disjointness and coverage of one accumulator): the map from (lane group, thread in
  group, half, element) to the 16 × 8 tile is injective and lands inside the tile. -/
theorem fragment_injective (g₁ q₁ h₁ i₁ g₂ q₂ h₂ i₂ : Nat)
    (hg₁ : g₁ < 8) (hq₁ : q₁ < 4) (hh₁ : h₁ < 2) (hi₁ : i₁ < 2)
    (hg₂ : g₂ < 8) (hq₂ : q₂ < 4) (hh₂ : h₂ < 2) (hi₂ : i₂ < 2)
    (hrow : g₁ + 8 * h₁ = g₂ + 8 * h₂) (hcol : 2 * q₁ + i₁ = 2 * q₂ + i₂) :
    g₁ = g₂ ∧ q₁ = q₂ ∧ h₁ = h₂ ∧ i₁ = i₂ := by
  omega

/-- PO1 (coverage): every element `(r, c)` of a 16 × 8 accumulator tile is held by lane
  `4 (r % 8) + c / 2`, half `r / 8`, element `c % 2`. -/
theorem fragment_cover (r c : Nat) (hr : r < 16) (hc : c < 8) :
    r % 8 + 8 * (r / 8) = r ∧ 2 * (c / 2) + c % 2 = c ∧ 4 * (r % 8) + c / 2 < 32 := by
  omega

/-- PO1 (disjointness across warps and blocks): warp `(wm, wn)` of block `(bx, by)` owns rows
  `32 by + 16 wm + [0, 16)` and columns `32 bx + 16 wn + [0, 16)`; the owners are unique. -/
theorem warp_tile_injective (b₁ w₁ r₁ b₂ w₂ r₂ : Nat) (hw₁ : w₁ < 2) (hw₂ : w₂ < 2)
    (hr₁ : r₁ < 16) (hr₂ : r₂ < 16) (h : 32 * b₁ + 16 * w₁ + r₁ = 32 * b₂ + 16 * w₂ + r₂) :
    b₁ = b₂ ∧ w₁ = w₂ ∧ r₁ = r₂ := by
  omega

/-- PO2 (bounds): a 16-byte copy of 8 halves at row `bm + row < m`, column `kt * 16 + col` with
  `col + 8 ≤ 16` and `kt < k / 16` ends inside A (the B copies are the same statement with
  `k × n`). -/
theorem copy_in_bounds (m k row kt col : Nat) (hr : row < m) (hk : k % 16 = 0) (ht : kt < k / 16)
    (hc : col + 8 ≤ 16) : row * k + (kt * 16 + col) + 8 ≤ m * k := by
  have hrun : kt * 16 + col + 8 ≤ k := by omega
  exact row_major_run_in_bounds m k row (kt * 16 + col) 8 hr hrun

/-- PO2 (bounds, shared): A chunks `tid < 64` cover rows `< 32`, columns `< 16` of a 32 × 16
  stage, B chunks `c < 64` rows `< 16`, columns `< 32` of a 16 × 32 stage. -/
theorem chunk_in_tile (c : Nat) (h : c < 64) :
    c / 2 < 32 ∧ 8 * (c % 2) + 8 ≤ 16 ∧ c / 4 < 16 ∧ 8 * (c % 4) + 8 ≤ 32 := by
  omega

/-- PO3 (convergence): every barrier is reached by all 128 threads: the trip count `k / 16` is
  the same for the whole block, and the only branches (A or B copy, last-step skip of the
  prefetch) close before the barrier; `a` threads on one side, `128 - a` on the other. -/
theorem barrier_all_arrive (a : Nat) (ha : a ≤ 128) : a + (128 - a) = 128 := by
  omega

/-- PO4 (rounding): an f16 significand has 11 bits, so the product of two is below 2^22 and is
  exact in the 24-bit f32 significand of the accumulator: only the additions round. -/
theorem f16_product_exact (a b : Nat) (ha : a < 2048) (hb : b < 2048) : a * b < 16777216 := by
  have ha' : a ≤ 2047 := by omega
  have hb' : b ≤ 2047 := by omega
  have h := Nat.mul_le_mul ha' hb'
  omega

/-- PO6 (initialised): each slot of a stage is copied by exactly one chunk before it is read:
  chunk `c` ↔ (row `c / 2`, column block `c % 2`) is a bijection onto the 32 × 2 blocks of A
  (`c / 4`, `c % 4` onto the 16 × 4 blocks of B). -/
theorem chunk_bijective (c : Nat) (h : c < 64) :
    (c / 2) * 2 + c % 2 = c ∧ (c / 4) * 4 + c % 4 = c := by
  omega

/-- PO7 (race freedom): the stage being filled is never the stage being read: step `kt` reads
  `kt % 2` while copies for step `kt + 1` write `(kt + 1) % 2`; the barrier at the end of step
  `kt` orders its reads before the copies of step `kt + 2` into the same stage. -/
theorem stages_differ (kt : Nat) : kt % 2 ≠ (kt + 1) % 2 ∧ (kt + 2) % 2 = kt % 2 := by
  refine ⟨?_, ?_⟩ <;> omega

/-- PO8 (termination): `k / 16` steps of 16 cover exactly the k indices when `k % 16 = 0`. -/
theorem k_steps_exact (k : Nat) (h : k % 16 = 0) : k / 16 * 16 = k := by
  omega

/-- PO5 (resources): two stages of a 32 × 16 and a 16 × 32 f16 tile = 4096 bytes of static
  shared memory, 128 threads per block, within the sm_86 limits. -/
theorem resources_fit : 2 * (32 * 16 + 16 * 32) * 2 = 4096 ∧ 4096 ≤ 48 * 1024 ∧ 128 ≤ 1024 := by
  decide

end GemmMma
