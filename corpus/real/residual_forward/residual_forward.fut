-- llm.c residual forward: out = inp1 + inp2, bf16, added in f32
-- ==
-- entry: residual_forward_kernel1
-- input { [1f32] [2f32] }
-- output { [3f32] }

entry residual_forward_kernel1 [n] (a: [n]f32) (b: [n]f32) : [n]f32 = map2 (+) a b
