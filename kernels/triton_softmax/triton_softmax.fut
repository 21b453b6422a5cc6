-- Specification of kernels/triton_softmax/triton_softmax.py (a Triton kernel): row-wise, max-shifted softmax.
--   y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r)
-- ==
-- entry: softmax_kernel
-- input { [[0f32, 0f32], [5f32, 5f32]] }
-- output { [[0.5f32, 0.5f32], [0.5f32, 0.5f32]] }
-- input { [[1f32, 1f32, 1f32, 1f32]] }
-- output { [[0.25f32, 0.25f32, 0.25f32, 0.25f32]] }
-- input { [[0f32, 1f32], [1000f32, -1000f32]] }
-- output { [[0.26894142f32, 0.7310586f32], [1f32, 0f32]] }
-- input { [[3f32]] }
-- output { [[1f32]] }

entry softmax_kernel [rows][cols] (x: [rows][cols]f32) : [rows][cols]f32 =
  map (\row ->
         let m = f32.maximum row
         let e = map (\v -> f32.exp (v - m)) row
         let s = f32.sum e
         in map (/ s) e)
      x
