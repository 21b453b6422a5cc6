-- Specification of kernels/saxpy/saxpy.cu: y[i] = alpha * x[i] + y[i] in f32.
-- ==
-- entry: saxpy
-- input { 2f32 [1f32, 2f32, 3f32] [4f32, 5f32, 6f32] }
-- output { [6f32, 9f32, 12f32] }
-- input { 0.5f32 [3f32] [-1.5f32] }
-- output { [0f32] }
-- input { -1f32 [1f32, -2f32, 0f32, 8f32] [1f32, -2f32, 0f32, 0.5f32] }
-- output { [0f32, 0f32, 0f32, -7.5f32] }

entry saxpy [n] (alpha: f32) (x: [n]f32) (y: [n]f32) : [n]f32 =
  map2 (\xi yi -> f32.fma alpha xi yi) x y
