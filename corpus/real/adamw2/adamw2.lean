namespace Adamw_kernel2

/-- PO2 (bounds): a thread of the grid computes an index below num_parameters + 256; a guard cuts the rest. -/
theorem guard_in_bounds (num_parameters b t : Nat) (hb : b < (num_parameters + 255) / 256) (ht : t < 256) :
    b * 256 + t < num_parameters + 256 := by
  omega

end Adamw_kernel2
