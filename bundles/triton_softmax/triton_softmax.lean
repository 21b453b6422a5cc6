/-
  Proof obligations of kernels/triton_softmax/triton_softmax.py (a Triton kernel; core Lean 4,
  no Mathlib).

  Model: grid (rows), 128 threads per program (num_warps = 4), BLOCK_SIZE = 256. Program `r`
  handles row `r`; thread `t < 128` holds columns `t` and `t + 128`, masked by `c < cols`. The
  reductions (butterfly shuffles within a warp, then one shared slot per warp) are checked by the
  falsification tests, not proved here.
-/
namespace TritonSoftmax

/-- PO1: row-major positions of distinct (row, column) pairs are distinct. -/
theorem row_injective (cols r₁ c₁ r₂ c₂ : Nat) (h₁ : c₁ < cols) (h₂ : c₂ < cols)
    (h : r₁ * cols + c₁ = r₂ * cols + c₂) : r₁ = r₂ ∧ c₁ = c₂ := by
  have hq : (r₁ * cols + c₁) / cols = (r₂ * cols + c₂) / cols := by rw [h]
  have hc : 0 < cols := by omega
  rw [Nat.mul_comm r₁, Nat.mul_comm r₂, Nat.mul_add_div hc, Nat.mul_add_div hc,
    Nat.div_eq_of_lt h₁, Nat.div_eq_of_lt h₂] at hq
  have hr : r₁ = r₂ := by omega
  subst hr
  exact ⟨rfl, Nat.add_left_cancel h⟩

/-- PO2: a masked access of row `r < rows`, column `c < cols` is inside `rows * cols`. -/
theorem access_in_bounds (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    r * cols + c < rows * cols := by
  have h1 : r * cols + c < (r + 1) * cols := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * cols ≤ rows * cols := Nat.mul_le_mul hr (Nat.le_refl cols)
  omega

/-- PO3: with `cols ≤ 256`, column `c` is held by thread `c % 128` in slot `c / 128 < 2`. -/
theorem block_covers_row (cols c : Nat) (hcols : cols ≤ 256) (hc : c < cols) :
    c % 128 < 128 ∧ c / 128 < 2 ∧ 128 * (c / 128) + c % 128 = c := by
  omega

/-- PO4: 4 warps of 32 threads and 16 bytes of shared memory fit sm_86. -/
theorem resources_fit : 4 * 32 ≤ 1024 ∧ 16 ≤ 48 * 1024 := by
  decide

end TritonSoftmax
