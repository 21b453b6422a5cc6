/-
  Proof obligations of kernels/transpose_tiled/transpose_tiled.cu (core Lean 4, no Mathlib).

  Model: block (32, 8), grid (ceil_div(cols, 32), ceil_div(rows, 32)); `row0 = 32 by`,
  `col0 = 32 bx`. Pass `j ∈ {0, 8, 16, 24}`: thread `(tx, ty)` (`tx < 32`, `ty < 8`) writes the
  tile slot `(ty + j, tx)` from `x[(row0 + ty + j) * cols + col0 + tx]`; after one barrier it
  reads the slot `(tx, ty + j)` and writes `out[(col0 + ty + j) * rows + row0 + tx]`, each
  access guarded by the matrix bounds. The tile is `32 × 33` floats; slot `(a, b)` is the float
  at `a * 33 + b`.
-/
namespace TransposeTiled

/-- Row-major addressing stays inside an `R × C` matrix. -/
theorem row_major_in_bounds (R C r c : Nat) (hr : r < R) (hc : c < C) : r * C + c < R * C := by
  have h1 : r * C + c < (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- The four passes `j = 8 k`, `k < 4`, with `ty < 8`, give each tile row `ty + j < 32` to one
  `(ty, k)` pair. -/
theorem pass_row_injective (ty₁ k₁ ty₂ k₂ : Nat) (h₁ : ty₁ < 8) (h₂ : ty₂ < 8)
    (h : ty₁ + 8 * k₁ = ty₂ + 8 * k₂) : ty₁ = ty₂ ∧ k₁ = k₂ := by
  omega

/-- PO1 (coverage): every tile row `a < 32` is reached by `ty = a % 8` on pass `k = a / 8 < 4`. -/
theorem pass_row_cover (a : Nat) (h : a < 32) :
    a % 8 < 8 ∧ a / 8 < 4 ∧ a % 8 + 8 * (a / 8) = a := by
  omega

/-- PO1 (disjointness of the output): the output element `(col0 + ty + 8 k, row0 + tx)` of
  block `(bx, by)` determines block, thread and pass: no element of `out` is written twice. -/
theorem out_owner_injective (gx₁ gy₁ tx₁ ty₁ k₁ gx₂ gy₂ tx₂ ty₂ k₂ : Nat)
    (a₁ : tx₁ < 32) (a₂ : tx₂ < 32) (b₁ : ty₁ < 8) (b₂ : ty₂ < 8) (c₁ : k₁ < 4) (c₂ : k₂ < 4)
    (hr : 32 * gx₁ + ty₁ + 8 * k₁ = 32 * gx₂ + ty₂ + 8 * k₂)
    (hc : 32 * gy₁ + tx₁ = 32 * gy₂ + tx₂) :
    gx₁ = gx₂ ∧ ty₁ = ty₂ ∧ k₁ = k₂ ∧ gy₁ = gy₂ ∧ tx₁ = tx₂ := by
  omega

/-- PO1 (coverage of the output): every `(c, r)` of `out` (a column `c < cols`, a row
  `r < rows` of `x`) has its block inside the grid. -/
theorem grid_covers (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    c / 32 < (cols + 31) / 32 ∧ r / 32 < (rows + 31) / 32 := by
  omega

/-- PO2 (bounds, global): guarded accesses `x[r * cols + c]` and `out[c * rows + r]` with
  `r < rows`, `c < cols` stay inside the `rows * cols` elements of each buffer. -/
theorem access_in_bounds (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    r * cols + c < rows * cols ∧ c * rows + r < cols * rows :=
  ⟨row_major_in_bounds rows cols r c hr hc, row_major_in_bounds cols rows c r hc hr⟩

/-- PO2 (bounds, shared): a slot `(a, b)` with `a, b < 32` is inside the 32 × 33 tile. -/
theorem shared_in_bounds (a b : Nat) (ha : a < 32) (hb : b < 32) : a * 33 + b < 32 * 33 := by
  omega

/-- PO3 (convergence): the barrier is outside every branch and both loops run 4 passes for every
  thread: all 256 threads of the block arrive. -/
theorem barrier_all_arrive : 32 / 8 = 4 ∧ 32 * 8 = 256 := by
  decide

/-- PO6 (initialised) and PO7 (race freedom): the slot `(a, b)` (`a * 33 + b`) identifies its
  row and column, so the one thread that reads it after the barrier reads what the one thread
  that owns it wrote before the barrier; different slots never alias. -/
theorem slot_injective (a₁ b₁ a₂ b₂ : Nat) (h₁ : b₁ < 33) (h₂ : b₂ < 33)
    (h : a₁ * 33 + b₁ = a₂ * 33 + b₂) : a₁ = a₂ ∧ b₁ = b₂ := by
  omega

/-- PO5 (resources): the tile is 32 × 33 f32 = 4224 bytes, within 48 KiB; 256 threads. -/
theorem resources_fit : 32 * 33 * 4 = 4224 ∧ 4224 ≤ 48 * 1024 ∧ 32 * 8 ≤ 1024 := by
  decide

/-- PO8 (termination): each of the two loops runs `j = 0, 8, 16, 24` and stops: 4 trips. -/
theorem loop_trip_count :
    0 + 8 = 8 ∧ 8 + 8 = 16 ∧ 16 + 8 = 24 ∧ 24 + 8 = 32 ∧ 24 < 32 ∧ ¬ (32 < 32) := by
  decide

end TransposeTiled
