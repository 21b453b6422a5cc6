-- CUDA samples reduce3<float>: each block sums 2 * blockDim elements (first add during the load) into one partial sum
-- ==
-- entry: reduce3
-- input { [1f32, 2f32] }
-- output { [3f32] }

entry reduce3 [n] (x: [n]f32) : []f32 =
  let nb = (n + 255) / 256
  in tabulate nb (\b -> f32.sum (map (\i -> if i < n then x[i] else 0f32) (map (+ b * 256) (iota 256))))
