/-
  Proof obligations of kernels/layernorm_rows/layernorm_rows.cu (core Lean 4, no Mathlib).

  Model: block (32, 4), grid ceil_div(rows, 4). Warp `ty < 4` of block `b` normalises row
  `r = 4 b + ty` when `r < rows` (the whole warp returns otherwise). Lane `l < 32` handles the
  columns `c = l + 32 j < cols`. A butterfly step at offset `o ∈ {16, 8, 4, 2, 1}` pairs lane
  `l` with lane `l xor o`, which for these offsets is `l + o` when bit `o` of `l` is clear and
  `l - o` when it is set; the five steps give every lane the sum of all 32 lanes (that last fact
  is about the shuffle semantics and is checked by the falsification tests, not proved here).
-/
namespace LayernormRows

/-- Row-major addressing stays inside an `R × C` matrix. -/
theorem row_major_in_bounds (R C r c : Nat) (hr : r < R) (hc : c < C) : r * C + c < R * C := by
  have h1 : r * C + c < (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- PO1 (disjointness): column `l + 32 j` belongs to one lane and one loop trip only. -/
theorem column_injective (l₁ j₁ l₂ j₂ : Nat) (h₁ : l₁ < 32) (h₂ : l₂ < 32)
    (h : l₁ + 32 * j₁ = l₂ + 32 * j₂) : l₁ = l₂ ∧ j₁ = j₂ := by
  omega

/-- PO1 (coverage): column `c` is visited by lane `c % 32` on trip `c / 32`. -/
theorem column_cover (c : Nat) : c % 32 < 32 ∧ c % 32 + 32 * (c / 32) = c := by
  omega

/-- PO1 (rows): warp `ty < 4` of block `b` owns row `4 b + ty`; distinct warps own distinct
  rows. -/
theorem row_owner_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 4) (h₂ : t₂ < 4)
    (h : 4 * b₁ + t₁ = 4 * b₂ + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (rows): the grid ceil_div(rows, 4) contains the block of every row `r < rows`. -/
theorem grid_covers (rows r : Nat) (hr : r < rows) :
    r / 4 < (rows + 3) / 4 ∧ 4 * (r / 4) + r % 4 = r := by
  omega

/-- PO2 (bounds): row `r < rows` and column `c < cols` address `x` and `y` inside
  `rows * cols`, and `gamma`, `beta` at `c < cols`. -/
theorem access_in_bounds (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    r * cols + c < rows * cols ∧ c < cols :=
  ⟨row_major_in_bounds rows cols r c hr hc, hc⟩

/-- PO3 (convergence): the 32 lanes `l < 32` of warp `ty` are the threads `ty * 32 + l` of the
  block, and they all have `threadIdx.y = ty`: the row test `4 b + ty < rows` is the same for the
  whole warp, so a warp runs every `shfl.sync` with all 32 lanes or returns as a whole (the full
  mask is right). -/
theorem warp_has_one_row (ty l : Nat) (hl : l < 32) :
    (ty * 32 + l) / 32 = ty ∧ (ty * 32 + l) % 32 = l := by
  omega

/-- PO3 and PO8 (butterfly): the offsets 16, 8, 4, 2, 1 are the halvings of 16 before 0 (five
  steps, the same for every lane), and they sum to 31: every lane's value reaches every lane. -/
theorem butterfly_steps :
    16 / 2 / 2 / 2 / 2 = 1 ∧ 16 / 2 / 2 / 2 / 2 / 2 = 0 ∧ 16 + 8 + 4 + 2 + 1 = 31 := by
  decide

/-- PO5 (resources): 32 × 4 = 128 threads, no shared memory, within sm_86 limits. -/
theorem resources_fit : 32 * 4 = 128 ∧ 128 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by
  decide

end LayernormRows
