-- Specification of kernels/vector_add/vector_add.cu: c[i] = a[i] + b[i] in f32.
-- ==
-- entry: vector_add
-- input { [1f32, 2f32, 3f32] [4f32, 5f32, 6f32] }
-- output { [5f32, 7f32, 9f32] }
-- input { [0.5f32] [-0.25f32] }
-- output { [0.25f32] }
-- input { [1e30f32, -1f32, 3.5f32, 0f32] [1e30f32, 1f32, -7f32, -0f32] }
-- output { [2e30f32, 0f32, -3.5f32, 0f32] }

entry vector_add [n] (a: [n]f32) (b: [n]f32) : [n]f32 =
  map2 (+) a b
