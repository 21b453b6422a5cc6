-- Specification of kernels/bias_gelu/bias_gelu.cu: bias add and tanh-approximate GELU.
--   v = x[r, c] + bias[c];  y[r, c] = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
-- ==
-- entry: bias_gelu
-- input { [[0f32, 1f32], [-1f32, 2f32]] [0f32, 0f32] }
-- output { [[0f32, 0.8411920f32], [-0.1588080f32, 1.9545977f32]] }
-- input { [[1f32, -2f32, 0.5f32]] [-1f32, 2f32, -0.5f32] }
-- output { [[0f32, 0f32, 0f32]] }
-- input { [[10f32]] [0f32] }
-- output { [[10f32]] }

def gelu_tanh (v: f32) : f32 =
  let u = f32.sqrt (2f32 / f32.pi) * (v + 0.044715f32 * v * v * v)
  in 0.5f32 * v * (1f32 + f32.tanh u)

entry bias_gelu [rows][cols] (x: [rows][cols]f32) (bias: [cols]f32) : [rows][cols]f32 =
  map (\row -> map2 (\xv b -> gelu_tanh (xv + b)) row bias) x
