/-
  Proof obligations of kernels/gemm_tiled/gemm_tiled.cu (core Lean 4, no Mathlib).

  Model: blocks of 16 × 16 threads; thread `(tx, ty)` of block `(bx, by)` owns
  `C[row][col]`, `row = by * 16 + ty`, `col = bx * 16 + tx`. At k step `kt` it writes the
  shared slots `As[ty][tx]`, `Bs[ty][tx]` (flat index `ty * 16 + tx`), the block waits, each
  thread reads `As[ty][p]`, `Bs[p][tx]` for `p < 16`, the block waits again.
-/
namespace GemmTiled

/-- Row-major addressing stays inside an `R × C` matrix. -/
theorem row_major_in_bounds (R C r c : Nat) (hr : r < R) (hc : c < C) : r * C + c < R * C := by
  have h1 : r * C + c < (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- PO1 (disjointness): distinct threads of the grid own distinct elements of C. -/
theorem owner_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 16) (h₂ : t₂ < 16)
    (h : b₁ * 16 + t₁ = b₂ * 16 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): the grid `ceil_div(n, 16)` (and likewise `ceil_div(m, 16)`) holds the owner
  of every column `col < n`. -/
theorem grid_covers (n col : Nat) (h : col < n) :
    col / 16 < (n + 15) / 16 ∧ (col / 16) * 16 + col % 16 = col ∧ col % 16 < 16 := by
  omega

/-- PO2 (bounds): guarded loads of A (`row < m`, `ka < k`), of B (`kb < k`, `col < n`) and the
  guarded store to C are inside the matrices. -/
theorem access_in_bounds (m n k row col ka kb : Nat) (hr : row < m) (hc : col < n)
    (ha : ka < k) (hb : kb < k) :
    row * k + ka < m * k ∧ kb * n + col < k * n ∧ row * n + col < m * n :=
  ⟨row_major_in_bounds m k row ka hr ha, row_major_in_bounds k n kb col hb hc,
    row_major_in_bounds m n row col hr hc⟩

/-- PO2 (bounds, shared): tile slots `ty * 16 + tx` and `ty * 16 + p`, `p * 16 + tx` are inside
  the 256-element tiles. -/
theorem shared_in_bounds (tx ty p : Nat) (hx : tx < 16) (hy : ty < 16) (hp : p < 16) :
    ty * 16 + tx < 256 ∧ ty * 16 + p < 256 ∧ p * 16 + tx < 256 := by
  omega

/-- PO3 (convergence): both barriers of a k step are reached by all 256 threads: the loads are
  guarded by selects, not branches around the barrier, and the trip count `ceil_div(k, 16)` is
  the same for every thread; if `a` threads load real data the rest load zeros. -/
theorem barrier_all_arrive (a : Nat) (ha : a ≤ 256) : a + (256 - a) = 256 := by
  omega

/-- PO6 (initialised): every slot read at a k step, flat index `s < 256`, is written at that
  step by thread `(s % 16, s / 16)` of the block before the first barrier. -/
theorem slot_has_writer (s : Nat) (h : s < 256) :
    s % 16 < 16 ∧ s / 16 < 16 ∧ (s / 16) * 16 + s % 16 = s := by
  omega

/-- PO7 (race freedom): no two threads write the same tile slot; the first barrier orders the
  writes before the reads, the second orders the reads before the next step's writes. -/
theorem slot_writers_distinct (x₁ y₁ x₂ y₂ : Nat) (h₁ : x₁ < 16) (h₂ : x₂ < 16)
    (h : y₁ * 16 + x₁ = y₂ * 16 + x₂) : x₁ = x₂ ∧ y₁ = y₂ := by
  omega

/-- PO8 (termination): `ceil_div(k, 16)` steps of 16 cover all k indices and no more than 15
  padding ones. -/
theorem k_steps_cover (k : Nat) : k ≤ (k + 15) / 16 * 16 ∧ (k + 15) / 16 * 16 < k + 16 := by
  omega

/-- PO5 (resources): two 16 × 16 f32 tiles = 2048 bytes of static shared memory, and 256 threads
  per block, within the sm_86 limits. -/
theorem resources_fit : 2 * 16 * 16 * 4 = 2048 ∧ 2048 ≤ 48 * 1024 ∧ 16 * 16 ≤ 1024 := by
  decide

end GemmTiled
