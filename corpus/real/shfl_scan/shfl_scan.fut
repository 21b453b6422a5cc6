-- CUDA samples shfl_scan_test: inclusive prefix sum within each block of 256 ints by __shfl_up_sync, and the block totals when partial_sums is not null
-- ==
-- entry: shfl_scan_test
-- input { [1, 2] }
-- output { [1, 3] }

entry shfl_scan_test [n] (x: [n]i32) : [n]i32 =
  let nb = n / 256
  in flatten (map (scan (+) 0) (unflatten (x :> [nb * 256]i32))) :> [n]i32
