namespace Matmul_forward_kernel1

/-- PO2 (bounds): a thread of the grid computes an index below BT + 256; a guard cuts the rest. -/
theorem guard_in_bounds (BT b t : Nat) (hb : b < (BT + 255) / 256) (ht : t < 256) :
    b * 256 + t < BT + 256 := by
  omega

end Matmul_forward_kernel1
