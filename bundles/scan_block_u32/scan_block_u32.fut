-- Specification of kernels/scan_block_u32/scan_block_u32.cu: inclusive prefix sums of u32
-- values (wrapping) within blocks of 256 elements.
-- ==
-- entry: scan_block_u32
-- input { [1u32, 2u32, 3u32, 4u32] }
-- output { [1u32, 3u32, 6u32, 10u32] }
-- input { [4294967295u32, 1u32, 5u32] }
-- output { [4294967295u32, 0u32, 5u32] }
-- input { [7u32] }
-- output { [7u32] }

entry scan_block_u32 [n] (x: [n]u32) : [n]u32 =
  map (\i -> let s = i - i % 256
             in reduce (+) 0u32 x[s:i + 1])
      (iota n)
