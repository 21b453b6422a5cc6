-- llm.c AdamW, kernel 2: moments by lerp, bias-corrected update with weight decay, at step t = 1 with llm.c's default hyper-parameters
-- ==
-- entry: adamw_kernel2
-- input { [0f32] [0f32] [0f32] [0f32] }
-- output { [0f32] }

entry adamw_kernel2 [n] (p: [n]f32) (g: [n]f32) (m: [n]f32) (v: [n]f32) : [n]f32 =
  map4 (\pi gi mi vi -> let m2 = 0.9f32 * mi + 0.1f32 * gi
                         let v2 = 0.999f32 * vi + 0.001f32 * gi * gi
                         in pi - 0.001f32 * ((m2 / 0.1f32) / (f32.sqrt (v2 / 0.001f32) + 1e-8f32) + 0.01f32 * pi)) p g m v
