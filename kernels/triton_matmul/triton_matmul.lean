/-
  Proof obligations of kernels/triton_matmul/triton_matmul.py (a Triton kernel; core Lean 4,
  no Mathlib).

  Model: 32 × 32 tiles of C, one program (4 warps, 128 threads) per tile, grid
  ceil_div(M, 32) · ceil_div(N, 32) in the tutorial's grouped order (GROUP_SIZE_M = 2); the K
  loop walks 32 columns of A (rows of B) per trip, masked by k < K. The tensor-core products
  (mma.sync m16n8k16) and their fragments are checked by the falsification tests.
-/
namespace TritonMatmul

/-- PO1: the tile grid holds the tile of every element: row `i < M` is in tile row `i / 32`,
  column `j < N` in tile column `j / 32`. -/
theorem tiles_cover (M N i j : Nat) (hi : i < M) (hj : j < N) :
    i / 32 < (M + 31) / 32 ∧ j / 32 < (N + 31) / 32 := by
  omega

/-- PO1: within a tile, `32 a + r` and `32 b + s` with `r, s < 32` name one element once. -/
theorem tile_injective (a r b s : Nat) (hr : r < 32) (hs : s < 32)
    (h : 32 * a + r = 32 * b + s) : a = b ∧ r = s := by
  omega

/-- PO2: a wrapped row index `i % M` of A is inside `[0, M)` (the tutorial's `% M`), and a masked
  K index `32 t + k < K` too. -/
theorem wrapped_in_bounds (M i : Nat) (hM : 0 < M) : i % M < M := Nat.mod_lt i hM

/-- PO3: 128 threads and 4096 bytes of shared memory fit sm_86. -/
theorem resources_fit : 4 * 32 ≤ 1024 ∧ 4096 ≤ 48 * 1024 := by
  decide

end TritonMatmul
