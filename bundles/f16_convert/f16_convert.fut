-- Specification of kernels/f16_convert/f16_convert.cu: y[i] = f16(x[i]), IEEE
-- round-to-nearest-even; overflow to infinity, gradual underflow to f16 subnormals.
-- The cases pin the rounding: 1 + 2^-11 is a tie that rounds to the even 1.0, 1 + 3*2^-11 a tie
-- that rounds up to the even 1 + 2^-9; 70000 overflows; 6e-8 rounds to the least subnormal 2^-24.
-- ==
-- entry: f16_convert
-- input { [1f32, -2.5f32, 65504f32, 70000f32, -70000f32] }
-- output { [1f16, -2.5f16, 65504f16, f16.inf, -f16.inf] }
-- input { [1.0009765625f32, 1.00048828125f32, 1.00146484375f32] }
-- output { [1.0009765625f16, 1f16, 1.001953125f16] }
-- input { [1e-8f32, 6e-8f32, 1e-5f32, -0f32] }
-- output { [0f16, 5.9604644775390625e-8f16, 1.0013580322265625e-5f16, -0f16] }

entry f16_convert [n] (x: [n]f32) : [n]f16 =
  map f16.f32 x
