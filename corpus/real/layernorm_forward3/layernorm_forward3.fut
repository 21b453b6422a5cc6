-- llm.c layernorm forward, kernel 3: one warp per row (cooperative groups reduce), mean and rstd written when their pointers are not null
-- ==
-- entry: layernorm_forward_kernel3
-- input { [[1f32, 1f32]] [1f32, 1f32] [0f32, 0f32] }
-- output { [[0f32, 0f32]] }

entry layernorm_forward_kernel3 [n][c] (x: [n][c]f32) (w: [c]f32) (b: [c]f32) : [n][c]f32 =
  map (\r -> let m = f32.sum r / f32.i64 c
              let v = f32.sum (map (\e -> (e - m) * (e - m)) r) / f32.i64 c
              let s = 1f32 / f32.sqrt (v + 1e-5f32)
              in map3 (\e wi bi -> (e - m) * s * wi + bi) r w b) x
