namespace Layernorm_forward_kernel3

/-- PO2 (bounds): a thread of the grid computes an index below N + 256; a guard cuts the rest. -/
theorem guard_in_bounds (N b t : Nat) (hb : b < (N + 255) / 256) (ht : t < 256) :
    b * 256 + t < N + 256 := by
  omega

end Layernorm_forward_kernel3
