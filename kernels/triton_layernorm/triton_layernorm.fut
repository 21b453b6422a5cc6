-- Specification of kernels/triton_layernorm/triton_layernorm.py (a Triton kernel): layer
-- normalisation of each row, y[r, c] = (x[r, c] - mean_r) * rstd_r * w[c] + b[c], with the
-- population variance var_r = mean_c (x[r, c] - mean_r)^2 and rstd_r = 1 / sqrt(var_r + eps).
-- ==
-- entry: _layer_norm_fwd_fused
-- input { [[1f32, 1f32, 1f32, 1f32]] [1f32, 1f32, 1f32, 1f32] [0f32, 0.5f32, -1f32, 2f32] 1e-5f32 }
-- output { [[0f32, 0.5f32, -1f32, 2f32]] }
-- input { [[-1f32, 1f32], [3f32, 5f32]] [1f32, 1f32] [0f32, 0f32] 1e-5f32 }
-- output { [[-0.999995f32, 0.999995f32], [-0.999995f32, 0.999995f32]] }

entry _layer_norm_fwd_fused [rows][cols] (x: [rows][cols]f32) (w: [cols]f32) (b: [cols]f32)
    (eps: f32) : [rows][cols]f32 =
  map (\row ->
         let n = f32.i64 cols
         let mean = f32.sum row / n
         let var = f32.sum (map (\v -> (v - mean) * (v - mean)) row) / n
         let rstd = 1f32 / f32.sqrt (var + eps)
         in map3 (\v g c -> (v - mean) * rstd * g + c) row w b)
      x
