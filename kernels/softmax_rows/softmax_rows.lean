/-
  Proof obligations of kernels/softmax_rows/softmax_rows.cu (core Lean 4, no Mathlib).

  Model: one block of 256 threads per row `r < rows` (grid = rows). Thread `t < 256` handles the
  columns `c = t + 256 j < cols`. The shared array `red[256]` is reduced by a tree: at stride
  `s ∈ {128, 64, ..., 1}` thread `t < s` reads `red[t]`, `red[t + s]` and writes `red[t]`; a
  barrier follows every step, outside the branch.
-/
namespace SoftmaxRows

/-- Row-major addressing stays inside an `R × C` matrix. -/
theorem row_major_in_bounds (R C r c : Nat) (hr : r < R) (hc : c < C) : r * C + c < R * C := by
  have h1 : r * C + c < (r + 1) * C := by
    rw [Nat.add_mul, Nat.one_mul]
    omega
  have h2 : (r + 1) * C ≤ R * C := Nat.mul_le_mul hr (Nat.le_refl C)
  omega

/-- PO1 (disjointness): column `t + 256 j` belongs to one thread and one loop trip only. -/
theorem column_injective (t₁ j₁ t₂ j₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : t₁ + 256 * j₁ = t₂ + 256 * j₂) : t₁ = t₂ ∧ j₁ = j₂ := by
  omega

/-- PO1 (coverage): every column `c` is visited by thread `c % 256` on trip `c / 256`. -/
theorem column_cover (c : Nat) : c % 256 < 256 ∧ c % 256 + 256 * (c / 256) = c := by
  omega

/-- PO2 (bounds): element `(r, c)` with `r < rows`, `c < cols` is inside the `rows × cols`
  input and output; the column loops test `c < cols` before every access. -/
theorem access_in_bounds (rows cols r c : Nat) (hr : r < rows) (hc : c < cols) :
    r * cols + c < rows * cols :=
  row_major_in_bounds rows cols r c hr hc

/-- PO2 (bounds, shared): the tree reads `red[t + s]` with `t < s ≤ 128`, inside `red[256]`. -/
theorem shared_in_bounds (t s : Nat) (hs : s ≤ 128) (ht : t < s) : t + s < 256 := by
  omega

/-- PO3 (convergence): at each tree step the `s` threads taking the branch `t < s` and the
  `256 - s` threads skipping it all arrive at the barrier after it: the whole block. -/
theorem barrier_all_arrive (s : Nat) (hs : s ≤ 256) : s + (256 - s) = 256 := by
  omega

/-- PO3 and PO8: the stride sequence 128, 64, ..., 1 is the same for every thread and has 8
  steps; the ninth halving gives 0 and ends the loop. -/
theorem reduction_trip_count :
    128 / 2 / 2 / 2 / 2 / 2 / 2 / 2 = 1 ∧ 128 / 2 / 2 / 2 / 2 / 2 / 2 / 2 / 2 = 0 := by
  decide

/-- PO6 (initialised): every slot a tree step reads, `t` and `t + s` with `t < s ≤ 128`, is one
  of the 256 slots that thread `slot` itself wrote before the first barrier. -/
theorem reads_were_written (t s : Nat) (hs : s ≤ 128) (ht : t < s) : t < 256 ∧ t + s < 256 := by
  omega

/-- PO7 (race freedom): within one tree step no thread reads a slot another thread writes:
  writes go to slots `< s`, the partner reads to slots `≥ s`. -/
theorem step_disjoint (t₁ t₂ s : Nat) (h₁ : t₁ < s) (h₂ : t₂ < s) : t₁ ≠ t₂ + s := by
  omega

/-- PO5 (resources): `red` is 256 f32 = 1024 bytes of static shared memory, within 48 KiB. -/
theorem resources_fit : 256 * 4 = 1024 ∧ 1024 ≤ 48 * 1024 ∧ 256 ≤ 1024 := by
  decide

end SoftmaxRows
