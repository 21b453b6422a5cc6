namespace Permute_kernel

/-- PO2 (bounds): a thread of the grid computes an index below dim1 + 256; a guard cuts the rest. -/
theorem guard_in_bounds (dim1 b t : Nat) (hb : b < (dim1 + 255) / 256) (ht : t < 256) :
    b * 256 + t < dim1 + 256 := by
  omega

end Permute_kernel
