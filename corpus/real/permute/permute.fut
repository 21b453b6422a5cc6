-- llm.c permute: (d1, d2, d3, d4) -> (d4, d3, d1, d2), one thread per element
-- ==
-- entry: permute_kernel
-- input { [[[[1f32]]]] }
-- output { [[[[1f32]]]] }

entry permute_kernel [a][b][c][d] (m: [a][b][c][d]f32) : [d][c][a][b]f32 =
  tabulate_4d d c a b (\i4 i3 i1 i2 -> m[i1, i2, i3, i4])
