namespace Transposecoalesced

/-- PO2 (bounds): a thread of the grid computes an index below width + 256; a guard cuts the rest. -/
theorem guard_in_bounds (width b t : Nat) (hb : b < (width + 255) / 256) (ht : t < 256) :
    b * 256 + t < width + 256 := by
  omega

end Transposecoalesced
