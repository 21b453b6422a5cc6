-- llm.c GELU forward (tanh approximation), bf16 in and out, f32 arithmetic
-- ==
-- entry: gelu_forward_kernel1
-- input { [0f32] }
-- output { [0f32] }

entry gelu_forward_kernel1 [n] (x: [n]f32) : [n]f32 =
  map (\v -> 0.5f32 * v * (1f32 + f32.tanh (f32.sqrt (2f32 / f32.pi) * (v + 0.044715f32 * v * v * v)))) x
