-- Specification of kernels/dot_shfl/dot_shfl.cu: per-block partial dot products, block 256.
--   out[j] = sum of a[i] * b[i] over i in [256 j, min(n, 256 (j + 1)))
-- The total dot product is the sum of out.
-- ==
-- entry: dot_shfl
-- input { [1f32, 2f32, 3f32] [4f32, 5f32, 6f32] }
-- output { [32f32] }
-- input { [0.5f32, -1f32, 2f32, 0f32, 8f32] [2f32, 3f32, 0.25f32, 9f32, -0.125f32] }
-- output { [-2.5f32] }

entry dot_shfl [n] (a: [n]f32) (b: [n]f32) : []f32 =
  let blocks = (n + 255) / 256
  in tabulate blocks (\j ->
       f32.sum (tabulate 256 (\t ->
         let i = j * 256 + t
         in if i < n then a[i] * b[i] else 0f32)))
