namespace Encoder_backward_kernel1

/-- PO2 (bounds): a thread of the grid computes an index below B + 256; a guard cuts the rest. -/
theorem guard_in_bounds (B b t : Nat) (hb : b < (B + 255) / 256) (ht : t < 256) :
    b * 256 + t < B + 256 := by
  omega

end Encoder_backward_kernel1
