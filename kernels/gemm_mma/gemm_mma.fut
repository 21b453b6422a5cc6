-- Specification of kernels/gemm_mma/gemm_mma.cu: C = A B with f16 inputs and an f32 result.
-- Every product of two f16 values is exact in f32; the kernel's sums round in f32.
-- (The kernel needs m, n multiples of 32 and k a multiple of 16; the specification does not.)
-- ==
-- entry: gemm_mma
-- input { [[1f16, 2f16], [3f16, 4f16]] [[5f16, 6f16], [7f16, 8f16]] }
-- output { [[19f32, 22f32], [43f32, 50f32]] }
-- input { [[0.5f16, -0.25f16, 2048f16]] [[2f16], [4f16], [0.5f16]] }
-- output { [[1024f32]] }

entry gemm_mma [m][k][n] (a: [m][k]f16) (b: [k][n]f16) : [m][n]f32 =
  map (\a_row ->
         map (\b_col -> f32.sum (map2 (\x y -> f32.f16 x * f32.f16 y) a_row b_col))
             (transpose b))
      a
