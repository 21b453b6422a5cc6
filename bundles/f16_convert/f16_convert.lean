/-
  Proof obligations of kernels/f16_convert/f16_convert.cu (core Lean 4, no Mathlib).

  Model: block size 256; thread `t < 256` of block `b` converts element `i = b * 256 + t` when
  `i < n`. The rounding obligation is stated on the integer significands that
  round-to-nearest-even works on: an f32 significand has 24 bits, an f16 significand 11, so a
  normal f32 value is rounded by dropping `d = 13` low bits (more for f16 subnormals).
-/
namespace F16Convert

/-- PO1 (disjointness): two threads with the same global index are the same thread. -/
theorem index_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO1 (coverage): the grid `ceil_div(n, 256)` holds the thread of every `i < n`. -/
theorem grid_covers (n i : Nat) (h : i < n) : i / 256 < (n + 255) / 256 ∧ i % 256 < 256 := by
  omega

/-- PO2 (bounds): 4-byte reads and 2-byte writes at index `i < n` end inside the 4n-byte input
  and the 2n-byte output. -/
theorem access_in_bounds (n i : Nat) (h : i < n) : 4 * i + 4 ≤ 4 * n ∧ 2 * i + 2 ≤ 2 * n := by
  omega

/-- PO4 (rounding): dropping the 13 low bits of a significand `m` with round-to-nearest-even
  (`q = m / 8192`, remainder `r`, round up iff `r > 4096` or `r = 4096` and `q` odd) gives a
  result within half a unit of the last place: `|q' * 8192 - m| ≤ 4096`. -/
theorem rne_half_ulp (m : Nat) :
    (m % 8192 < 4096 → m - (m / 8192) * 8192 ≤ 4096) ∧
    (m % 8192 > 4096 → (m / 8192 + 1) * 8192 - m ≤ 4096) ∧
    (m % 8192 = 4096 → (m / 8192 + 1) * 8192 - m = 4096 ∧ m - (m / 8192) * 8192 = 4096) := by
  refine ⟨fun h => ?_, fun h => ?_, fun h => ⟨?_, ?_⟩⟩ <;> omega

/-- PO4 (rounding, ties): on an exact tie the even neighbour is chosen, and exactly one of the
  two neighbours `q`, `q + 1` is even. -/
theorem rne_tie_even (q : Nat) : (q % 2 = 0 ∨ (q + 1) % 2 = 0) ∧ q % 2 ≠ (q + 1) % 2 := by
  refine ⟨?_, ?_⟩ <;> omega

/-- PO4 (range): the largest finite f16 is (2^11 - 1) * 2^5 = 65504, and the overflow threshold
  of round-to-nearest is halfway to 2^16, i.e. 65520: values at or above it round to infinity. -/
theorem f16_max_finite : (2048 - 1) * 32 = 65504 ∧ 65504 + 16 = 65520 ∧ 65520 < 65536 := by
  decide

/-- PO5 (resources): 256 threads and no shared memory fit the sm_86 per-block limits. -/
theorem resources_fit : 256 ≤ 1024 ∧ 0 ≤ 48 * 1024 := by
  decide

/-- PO8 (termination): each thread runs a loop-free path of at most one load, one convert and
  one store. -/
theorem work_bounded (n i : Nat) : (if i < n then 3 else 0) ≤ 3 := by
  split <;> omega

end F16Convert
