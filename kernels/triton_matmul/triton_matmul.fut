-- Specification of kernels/triton_matmul/triton_matmul.py (a Triton kernel): C = A B,
--   c[i, j] = sum_k a[i, k] * b[k, j], f16 inputs, f32 accumulation, f16 result.
-- ==
-- entry: matmul_kernel
-- input { [[1f16, 2f16], [3f16, 4f16]] [[1f16, 0f16], [0f16, 1f16]] }
-- output { [[1f16, 2f16], [3f16, 4f16]] }
-- input { [[1f16, 2f16, 3f16]] [[1f16], [1f16], [1f16]] }
-- output { [[6f16]] }

entry matmul_kernel [m][n][k] (a: [m][k]f16) (b: [k][n]f16) : [m][n]f16 =
  map (\row ->
         map (\col -> f16.f32 (f32.sum (map2 (\x y -> f16.to_f32 x * f16.to_f32 y) row col)))
             (transpose b))
      a
