-- llm.c cross-entropy forward: losses[b,t] = -log(probs[b,t,targets[b,t]])
-- ==
-- entry: crossentropy_forward_kernel1
-- input { [[1f32]] [0] }
-- output { [0f32] }

entry crossentropy_forward_kernel1 [bt][v] (probs: [bt][v]f32) (ix: [bt]i32) : [bt]f32 =
  map2 (\r i -> -(f32.log r[i])) probs ix
