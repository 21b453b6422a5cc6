namespace Reduce3

/-- PO2 (bounds): a thread of the grid computes an index below n + 256; a guard cuts the rest. -/
theorem guard_in_bounds (n b t : Nat) (hb : b < (n + 255) / 256) (ht : t < 256) :
    b * 256 + t < n + 256 := by
  omega

end Reduce3
