-- llm.c GPT-2 encoder backward: dwte[inp[b,t]] += dout[b,t] and dwpe[t] += dout[b,t] with float atomicAdd
-- ==
-- entry: encoder_backward_kernel1
-- input { [[1f32]] [[[2f32]]] }
-- output { [[3f32]] }

entry encoder_backward_kernel1 [b][t][c] (dwpe: [t][c]f32) (dout: [b][t][c]f32) : [t][c]f32 =
  map2 (\p i -> map2 (+) p (reduce (map2 (+)) (replicate c 0f32) (map (\r -> r[i]) dout))) dwpe (iota t)
