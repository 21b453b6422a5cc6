-- llm.c matmul backward bias, kernel 1: dbias[o] += sum over B*T rows of dout[.., o], one block per column, bf16
-- ==
-- entry: matmul_backward_bias_kernel1
-- input { [1f32] [[2f32]] }
-- output { [3f32] }

entry matmul_backward_bias_kernel1 [bt][oc] (db: [oc]f32) (d: [bt][oc]f32) : [oc]f32 =
  map2 (+) db (reduce (map2 (+)) (replicate oc 0f32) d)
