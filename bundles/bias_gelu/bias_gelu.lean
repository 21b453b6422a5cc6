/-
  Proof obligations of kernels/bias_gelu/bias_gelu.cu (core Lean 4, no Mathlib).

  Model: block (32, 8), grid (ceil_div(cols, 32), ceil_div(rows, 8)). Thread `(tx, ty)` with
  `tx < 32`, `ty < 8` of block `(bx, by)` owns element `(r, c) = (8 by + ty, 32 bx + tx)` and,
  when `r < rows ∧ c < cols`, reads `x[r * cols + c]` and `bias[c]` and writes `y[r * cols + c]`.
  The size domain (`rows, cols ≤ 4096`, `rows * cols ≤ 2^20`) keeps the u32 arithmetic exact.
-/
namespace BiasGelu

/-- Row-major addressing stays inside an `R × C` matrix. -/
theorem row_major_in_bounds (R C r c : Nat) (hr : r < R) (hc : c < C) : r * C + c < R * C := by
  have h1 : r * C + c < (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- PO1 (disjointness): two threads owning the same column index `32 bx + tx` have the same
  `bx` and `tx`; likewise for rows with 8. So no element is written by two threads. -/
theorem owner_injective (gx₁ tx₁ gx₂ tx₂ gy₁ ty₁ gy₂ ty₂ : Nat) (h₁ : tx₁ < 32) (h₂ : tx₂ < 32)
    (h₃ : ty₁ < 8) (h₄ : ty₂ < 8) (hc : 32 * gx₁ + tx₁ = 32 * gx₂ + tx₂)
    (hr : 8 * gy₁ + ty₁ = 8 * gy₂ + ty₂) : gx₁ = gx₂ ∧ tx₁ = tx₂ ∧ gy₁ = gy₂ ∧ ty₁ = ty₂ := by
  omega

/-- PO1 (coverage): the grid contains the owner of every `(r, c)` with `r < rows`, `c < cols`. -/
theorem grid_covers (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    c / 32 < (cols + 31) / 32 ∧ r / 8 < (rows + 7) / 8 ∧
      32 * (c / 32) + c % 32 = c ∧ 8 * (r / 8) + r % 8 = r := by
  omega

/-- PO2 (bounds): under the guard `r < rows ∧ c < cols`, `x` and `y` are accessed at
  `r * cols + c < rows * cols`, and `bias` at `c < cols`. -/
theorem access_in_bounds (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    r * cols + c < rows * cols ∧ c < cols :=
  ⟨row_major_in_bounds rows cols r c hr hc, hc⟩

/-- PO2 (no wrap): in the size domain the flat index fits in a u32 (the kernel forms it in 64
  bits anyway) and the thread coordinates of the grid stay below 2^32. -/
theorem index_fits_u32 (rows cols r c : Nat) (hs : rows * cols ≤ 1048576) (hr : r < rows)
    (hc : c < cols) : r * cols + c < 4294967296 := by
  have h := row_major_in_bounds rows cols r c hr hc
  omega

/-- PO5 (resources): 32 × 8 = 256 threads, no shared memory, within sm_86 limits. -/
theorem resources_fit : 32 * 8 = 256 ∧ 256 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by
  decide

/-- PO8 (termination): loop-free; a thread does at most two loads and one store. -/
theorem work_bounded (rows cols r c : Nat) :
    (if r < rows ∧ c < cols then 3 else 0) ≤ 3 := by
  split <;> omega

end BiasGelu
