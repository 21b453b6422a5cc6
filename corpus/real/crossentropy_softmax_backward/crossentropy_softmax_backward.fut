-- llm.c cross-entropy + softmax backward: dlogits[b,t,v] += (probs[b,t,v] - [v == target]) dlosses[b,t]
-- ==
-- entry: crossentropy_softmax_backward_kernel1
-- input { [[0f32]] [1f32] [[1f32]] [0] }
-- output { [[0f32]] }

entry crossentropy_softmax_backward_kernel1 [bt][v] (d: [bt][v]f32) (dl: [bt]f32) (p: [bt][v]f32) (ix: [bt]i32) : [bt][v]f32 =
  map4 (\dr l pr i -> map3 (\x q j -> x + (q - (if j == i64.i32 i then 1f32 else 0f32)) * l) dr pr (iota v)) d dl p ix
