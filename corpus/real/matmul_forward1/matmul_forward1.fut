-- llm.c matmul forward, kernel 1: out = inp @ weight^T + bias, one thread per output, bias may be NULL
-- ==
-- entry: matmul_forward_kernel1
-- input { [[2f32]] [[3f32]] [1f32] }
-- output { [[7f32]] }

entry matmul_forward_kernel1 [bt][c][oc] (x: [bt][c]f32) (w: [oc][c]f32) (b: [oc]f32) : [bt][oc]f32 =
  map (\r -> map2 (\wr bi -> bi + f32.sum (map2 (*) r wr)) w b) x
