-- Specification of kernels/transpose_tiled/transpose_tiled.cu: out[c, r] = x[r, c].
-- ==
-- entry: transpose_tiled
-- input { [[1f32, 2f32, 3f32], [4f32, 5f32, 6f32]] }
-- output { [[1f32, 4f32], [2f32, 5f32], [3f32, 6f32]] }
-- input { [[7f32]] }
-- output { [[7f32]] }
-- input { [[1f32], [2f32], [3f32]] }
-- output { [[1f32, 2f32, 3f32]] }

entry transpose_tiled [rows][cols] (x: [rows][cols]f32) : [cols][rows]f32 =
  transpose x
