-- Specification of kernels/gemm_tiled/gemm_tiled.cu: C = A B in f32, row-major.
-- ==
-- entry: gemm_tiled
-- input { [[1f32, 2f32], [3f32, 4f32]] [[5f32, 6f32], [7f32, 8f32]] }
-- output { [[19f32, 22f32], [43f32, 50f32]] }
-- input { [[1f32, 0f32, 2f32]] [[1f32], [5f32], [-0.5f32]] }
-- output { [[0f32]] }
-- input { [[2f32], [-1f32]] [[1f32, 2f32, 3f32]] }
-- output { [[2f32, 4f32, 6f32], [-1f32, -2f32, -3f32]] }

entry gemm_tiled [m][k][n] (a: [m][k]f32) (b: [k][n]f32) : [m][n]f32 =
  map (\a_row -> map (\b_col -> f32.sum (map2 (*) a_row b_col)) (transpose b)) a
