-- llm.c softmax forward, kernel 2: one block per row, max and sum by shared-memory tree reductions
-- ==
-- entry: softmax_forward_kernel2
-- input { [[0f32, 0f32]] }
-- output { [[0.5f32, 0.5f32]] }

entry softmax_forward_kernel2 [n][c] (x: [n][c]f32) : [n][c]f32 =
  map (\r -> let m = f32.maximum r
              let e = map (\v -> f32.exp (v - m)) r
              in map (/ f32.sum e) e) x
