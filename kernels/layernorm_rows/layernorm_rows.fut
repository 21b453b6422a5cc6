-- Specification of kernels/layernorm_rows/layernorm_rows.cu: layer normalisation of each row,
--   y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + 1e-5) * gamma[c] + beta[c]
-- with the population variance var_r = mean_c (x[r, c] - mean_r)^2.
-- ==
-- entry: layernorm_rows
-- input { [[1f32, 1f32, 1f32, 1f32]] [1f32, 1f32, 1f32, 1f32] [0f32, 0.5f32, -1f32, 2f32] }
-- output { [[0f32, 0.5f32, -1f32, 2f32]] }
-- input { [[-1f32, 1f32], [3f32, 5f32]] [1f32, 1f32] [0f32, 0f32] }
-- output { [[-0.999995f32, 0.999995f32], [-0.999995f32, 0.999995f32]] }
-- input { [[0f32, 2f32]] [2f32, 3f32] [1f32, 1f32] }
-- output { [[-0.99999f32, 3.999985f32]] }

entry layernorm_rows [rows][cols] (x: [rows][cols]f32) (gamma: [cols]f32) (beta: [cols]f32)
    : [rows][cols]f32 =
  map (\row ->
         let n = f32.i64 cols
         let mean = f32.sum row / n
         let var = f32.sum (map (\v -> (v - mean) * (v - mean)) row) / n
         let rstd = 1f32 / f32.sqrt (var + 1e-5f32)
         in map3 (\v g b -> (v - mean) * rstd * g + b) row gamma beta)
      x
