/-
  Proof obligations of kernels/saxpy/saxpy.cu (core Lean 4, no Mathlib).

  Model: the kernel runs with block size 256 (contracts/saxpy.yaml, kernel.launch.block);
  thread `t < 256` of block `b` computes the global index `i = b * 256 + t` and, when `i < n`,
  reads `x[i]` and `y[i]` and writes `y[i]`. Indices are natural numbers; the contract's size
  domain (`1 ≤ n ≤ 2^20`) keeps the u32 arithmetic of the kernel from wrapping.
-/
namespace Saxpy

/-- PO1 (disjointness): two threads that compute the same global index are the same thread, so
  no element of `y` is read-modified-written by two threads. -/
theorem index_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): every index `i` is the global index of thread `i % 256` of block `i / 256`. -/
theorem index_cover (i : Nat) : (i / 256) * 256 + i % 256 = i ∧ i % 256 < 256 := by
  omega

/-- PO1 (coverage): the launched grid `ceil_div(n, 256)` contains the block of every `i < n`. -/
theorem grid_covers (n i : Nat) (h : i < n) : i / 256 < (n + 255) / 256 := by
  omega

/-- PO2 (bounds): a thread of the grid computes an index below `n + 256`, and the guard `i < n`
  cuts every access outside the n-element arrays. -/
theorem guard_in_bounds (n b t : Nat) (hb : b < (n + 255) / 256) (ht : t < 256) :
    b * 256 + t < n + 256 := by
  omega

/-- PO2 (no wrap): within the size domain `n ≤ 2^20` every index of the grid fits in a u32. -/
theorem index_fits_u32 (n b t : Nat) (hn : n ≤ 1048576) (hb : b < (n + 255) / 256)
    (ht : t < 256) : b * 256 + t < 4294967296 := by
  omega

/-- PO5 (resources): 256 threads and no shared memory fit the sm_86 limits of 1024 threads per
  block and 48 KiB of static shared memory. -/
theorem resources_fit : 256 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by
  decide

/-- PO8 (termination): loop-free: every path runs at most two loads and one store. -/
theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by
  split <;> omega

end Saxpy
