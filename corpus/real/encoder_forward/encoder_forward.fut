-- llm.c GPT-2 encoder forward: token embedding plus position embedding, one thread per output element, bf16
-- ==
-- entry: encoder_forward_kernel2
-- input { [[0]] [[1f32]] [[2f32]] }
-- output { [[[3f32]]] }

entry encoder_forward_kernel2 [b][t][v][c] (ix: [b][t]i32) (wte: [v][c]f32) (wpe: [t][c]f32) : [b][t][c]f32 =
  map (\row -> map2 (\i p -> map2 (+) wte[i] p) row wpe) ix
