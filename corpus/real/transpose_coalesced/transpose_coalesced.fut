-- CUDA samples transposeCoalesced: 32x32 tiles through shared memory, width and height multiples of 32 (the sample's stated requirement)
-- ==
-- entry: transposeCoalesced
-- input { [[1f32, 2f32]] }
-- output { [[1f32], [2f32]] }

entry transposeCoalesced [h][w] (x: [h][w]f32) : [w][h]f32 = transpose x
