// The folders that turn torch's shape computations into constants.
// RUN: fsdp-opt %s --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @shape_chain
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as torch exports
// x.view(B, -1): all folded, and the identity Reshape goes too.
func.func @shape_chain(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  // CHECK-NOT: onnx.Shape
  // CHECK-NOT: onnx.Gather
  // CHECK-NOT: onnx.Concat
  // CHECK: %[[SHAPE:.*]] = onnx.Constant dense<[2, -1]> : tensor<2xi64>
  // CHECK: %[[R:.*]] = onnx.Reshape %arg0, %[[SHAPE]]
  // CHECK: return %[[R]]
  %shape = onnx.Shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %zero = onnx.Constant dense<0> : tensor<i64>
  %b = onnx.Gather %shape, %zero : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %axes = onnx.Constant dense<0> : tensor<1xi64>
  %b1 = onnx.Unsqueeze %b, %axes : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %minus = onnx.Constant dense<-1> : tensor<1xi64>
  %new = onnx.Concat %b1, %minus {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %y = onnx.Reshape %x, %new : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  return %y : tensor<2x12xf32>
}

// CHECK-LABEL: func.func @arithmetic
func.func @arithmetic() -> (tensor<2xi64>, tensor<3xi64>, tensor<2xi1>, tensor<2xf32>, tensor<4xi64>, tensor<2x2xf32>) {
  // CHECK-DAG: onnx.Constant dense<[6, 20]> : tensor<2xi64>
  // CHECK-DAG: onnx.Constant dense<[0, 2, 4]> : tensor<3xi64>
  // CHECK-DAG: onnx.Constant dense<[true, false]> : tensor<2xi1>
  // CHECK-DAG: onnx.Constant dense<[5.000000e-01, 2.500000e-01]> : tensor<2xf32>
  // CHECK-DAG: onnx.Constant dense<[3, 4, 5, 6]> : tensor<4xi64>
  // CHECK-DAG: onnx.Constant dense<7.000000e+00> : tensor<2x2xf32>
  // CHECK-NOT: onnx.Mul
  // CHECK-NOT: onnx.Range
  %a = onnx.Constant dense<[2, 4]> : tensor<2xi64>
  %b = onnx.Constant dense<[3, 5]> : tensor<2xi64>
  %mul = onnx.Mul %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %start = onnx.Constant dense<0> : tensor<i64>
  %limit = onnx.Constant dense<6> : tensor<i64>
  %delta = onnx.Constant dense<2> : tensor<i64>
  %range = onnx.Range %start, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  %c = onnx.Constant dense<[2, 5]> : tensor<2xi64>
  %eq = onnx.Equal %a, %c : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
  %f = onnx.Constant dense<[1.0, 0.5]> : tensor<2xf32>
  %half = onnx.Constant dense<0.5> : tensor<f32>
  %div = onnx.Mul %f, %half : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %seq = onnx.Constant dense<[0, 1, 2, 3, 4, 5, 6]> : tensor<7xi64>
  %s3 = onnx.Constant dense<3> : tensor<1xi64>
  %e7 = onnx.Constant dense<7> : tensor<1xi64>
  %none = onnx.NoValue
  %slice = onnx.Slice %seq, %s3, %e7, %none, %none : (tensor<7xi64>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<4xi64>
  %dims = onnx.Constant dense<2> : tensor<2xi64>
  %sevens = onnx.ConstantOfShape %dims {value = dense<7.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x2xf32>
  return %mul, %range, %eq, %div, %slice, %sevens : tensor<2xi64>, tensor<3xi64>, tensor<2xi1>, tensor<2xf32>, tensor<4xi64>, tensor<2x2xf32>
}

// CHECK-LABEL: func.func @casts_and_slices
// Booleans and unsigned integers widen with zeros; a negative-step slice.
// CHECK-DAG: onnx.Constant dense<[1, 0]> : tensor<2xi64>
// CHECK-DAG: onnx.Constant dense<2.000000e+02> : tensor<1xf32>
// CHECK-DAG: onnx.Constant dense<[40, 20]> : tensor<2xi64>
// CHECK-DAG: onnx.Constant dense<[5, 3, 1]> : tensor<3xi64>
// CHECK-NOT: onnx.Cast
// CHECK-NOT: onnx.Slice
// CHECK-NOT: onnx.Range
func.func @casts_and_slices() -> (tensor<2xi64>, tensor<1xf32>, tensor<2xi64>, tensor<3xi64>) {
  %b = onnx.Constant dense<[true, false]> : tensor<2xi1>
  %i = onnx.Cast %b {to = 7 : i64} : (tensor<2xi1>) -> tensor<2xi64>
  %u = onnx.Constant dense<200> : tensor<1xui8>
  %f = onnx.Cast %u {to = 1 : i64} : (tensor<1xui8>) -> tensor<1xf32>
  %d = onnx.Constant dense<[10, 20, 30, 40]> : tensor<4xi64>
  %s = onnx.Constant dense<-1> : tensor<1xi64>
  %e = onnx.Constant dense<-9223372036854775807> : tensor<1xi64>
  %st = onnx.Constant dense<-2> : tensor<1xi64>
  %none = onnx.NoValue
  %r = onnx.Slice %d, %s, %e, %none, %st : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>, none, tensor<1xi64>) -> tensor<2xi64>
  %five = onnx.Constant dense<5> : tensor<i64>
  %zero = onnx.Constant dense<0> : tensor<i64>
  %m2 = onnx.Constant dense<-2> : tensor<i64>
  %range = onnx.Range %five, %zero, %m2 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<3xi64>
  return %i, %f, %r, %range : tensor<2xi64>, tensor<1xf32>, tensor<2xi64>, tensor<3xi64>
}

// CHECK-LABEL: func.func @negate
// LayerNormalization's function body negates its axis to size the reduced
// shape: Neg of a constant folds (integers and floats); of a value, stays.
func.func @negate(%x: tensor<2xf32>) -> (tensor<1xi64>, tensor<2xf32>, tensor<2xf32>) {
  // CHECK-DAG: onnx.Constant dense<1> : tensor<1xi64>
  // CHECK-DAG: onnx.Constant dense<[-1.500000e+00, 2.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: onnx.Neg %arg0
  %axis = onnx.Constant dense<-1> : tensor<1xi64>
  %n = onnx.Neg %axis : (tensor<1xi64>) -> tensor<1xi64>
  %f = onnx.Constant dense<[1.5, -2.0]> : tensor<2xf32>
  %nf = onnx.Neg %f : (tensor<2xf32>) -> tensor<2xf32>
  %nx = onnx.Neg %x : (tensor<2xf32>) -> tensor<2xf32>
  return %n, %nf, %nx : tensor<1xi64>, tensor<2xf32>, tensor<2xf32>
}

// Hugging Face's attention masks (transformers 5, torch 2.x's exporter)
// depend only on shapes: GatherND, Expand, CumSum, Not, Max and the
// comparisons fold once the sequence length is static.
// CHECK-LABEL: func.func @mask_ops
func.func @mask_ops() -> (tensor<2x2xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2xi1>, tensor<3xi64>, tensor<3xf32>) {
  // GatherND: elements (0,2) and (1,0) of [[0,1,2],[3,4,5]] are 2 and 3.
  // CHECK-DAG: onnx.Constant dense<{{\[}}[2, 3], [3, 0]]> : tensor<2x2xi64>
  // Expand of a row to 2x3.
  // CHECK-DAG: onnx.Constant dense<{{\[}}[0, 1, 2], [0, 1, 2]]> : tensor<2x3xi64>
  // CumSum along axis 1, inclusive and exclusive-reversed.
  // CHECK-DAG: onnx.Constant dense<{{\[}}[0, 1, 3], [3, 7, 12]]> : tensor<2x3xi64>
  // CHECK-DAG: onnx.Constant dense<{{\[}}[3, 2, 0], [9, 5, 0]]> : tensor<2x3xi64>
  // CHECK-DAG: onnx.Constant dense<[false, true]> : tensor<2xi1>
  // CHECK-DAG: onnx.Constant dense<[2, 1, 2]> : tensor<3xi64>
  // CHECK-DAG: onnx.Constant dense<[-1.000000e+00, 0.000000e+00, -3.000000e+00]> : tensor<3xf32>
  // CHECK-NOT: onnx.GatherND
  // CHECK-NOT: onnx.Expand
  // CHECK-NOT: onnx.CumSum
  // CHECK-NOT: onnx.Not
  // CHECK-NOT: onnx.Max
  // CHECK-NOT: onnx.Min
  %data = onnx.Constant dense<[[0, 1, 2], [3, 4, 5]]> : tensor<2x3xi64>
  %pairs = onnx.Constant dense<[[[0, 2], [1, 0]], [[1, 0], [0, 0]]]> : tensor<2x2x2xi64>
  %g = onnx.GatherND %data, %pairs : (tensor<2x3xi64>, tensor<2x2x2xi64>) -> tensor<2x2xi64>
  %row = onnx.Constant dense<[0, 1, 2]> : tensor<3xi64>
  %shape = onnx.Constant dense<[2, 3]> : tensor<2xi64>
  %e = onnx.Expand %row, %shape : (tensor<3xi64>, tensor<2xi64>) -> tensor<2x3xi64>
  %one = onnx.Constant dense<1> : tensor<i64>
  %c = onnx.CumSum %data, %one : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
  %r = onnx.CumSum %data, %one {exclusive = 1 : i64, reverse = 1 : i64} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
  %bits = onnx.Constant dense<[true, false]> : tensor<2xi1>
  %n = onnx.Not %bits : (tensor<2xi1>) -> tensor<2xi1>
  %lo = onnx.Constant dense<[2, 0, 1]> : tensor<3xi64>
  %hi = onnx.Constant dense<[1, 1, 2]> : tensor<3xi64>
  %m = onnx.Max %lo, %hi : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %fa = onnx.Constant dense<[-1.0, 2.0, -3.0]> : tensor<3xf32>
  %fb = onnx.Constant dense<0.0> : tensor<f32>
  %mn = onnx.Min %fa, %fb : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %g, %e, %c, %r, %n, %m, %mn : tensor<2x2xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<2xi1>, tensor<3xi64>, tensor<3xf32>
}

// A GatherND with batch_dims = 1: each batch row picks from its own row
// (negative indices count from the end).
// CHECK-LABEL: func.func @gather_nd_batch
func.func @gather_nd_batch() -> tensor<2x2xi64> {
  // CHECK: onnx.Constant dense<{{\[}}[2, 0], [4, 4]]> : tensor<2x2xi64>
  %data = onnx.Constant dense<[[0, 1, 2], [3, 4, 5]]> : tensor<2x3xi64>
  %idx = onnx.Constant dense<[[[2], [0]], [[1], [-2]]]> : tensor<2x2x1xi64>
  %g = onnx.GatherND %data, %idx {batch_dims = 1 : i64} : (tensor<2x3xi64>, tensor<2x2x1xi64>) -> tensor<2x2xi64>
  return %g : tensor<2x2xi64>
}

// torch 2.x's exported attention takes the square root of a float64 scale.
// CHECK-LABEL: func.func @sqrt_scale
func.func @sqrt_scale() -> (tensor<f64>, tensor<2xf32>) {
  // CHECK-DAG: onnx.Constant dense<2.500000e-01> : tensor<f64>
  // CHECK-DAG: onnx.Constant dense<[3.000000e+00, 5.000000e-01]> : tensor<2xf32>
  // CHECK-NOT: onnx.Sqrt
  %a = onnx.Constant dense<0.0625> : tensor<f64>
  %b = onnx.Constant dense<[9.0, 0.25]> : tensor<2xf32>
  %ra = onnx.Sqrt %a : (tensor<f64>) -> tensor<f64>
  %rb = onnx.Sqrt %b : (tensor<2xf32>) -> tensor<2xf32>
  return %ra, %rb : tensor<f64>, tensor<2xf32>
}

// Ceil and Floor of sizes, as MobileViT rounds its feature map up to a
// multiple of the patch size (negative values round away from / towards
// zero as numpy does).
// CHECK-LABEL: func.func @ceil_floor
func.func @ceil_floor() -> (tensor<3xf32>, tensor<3xf64>) {
  // CHECK-DAG: onnx.Constant dense<[3.000000e+00, 2.000000e+00, -1.000000e+00]> : tensor<3xf32>
  // CHECK-DAG: onnx.Constant dense<[2.000000e+00, 2.000000e+00, -2.000000e+00]> : tensor<3xf64>
  // CHECK-NOT: onnx.Ceil
  // CHECK-NOT: onnx.Floor
  %a = onnx.Constant dense<[2.5, 2.0, -1.5]> : tensor<3xf32>
  %b = onnx.Constant dense<[2.5, 2.0, -1.5]> : tensor<3xf64>
  %c = onnx.Ceil %a : (tensor<3xf32>) -> tensor<3xf32>
  %f = onnx.Floor %b : (tensor<3xf64>) -> tensor<3xf64>
  return %c, %f : tensor<3xf32>, tensor<3xf64>
}

// Slice over several axes of a 2-D constant and Concat along its last axis,
// as Hugging Face's position ids are built.
// CHECK-LABEL: func.func @slice_concat_2d
func.func @slice_concat_2d() -> (tensor<2x1xi64>, tensor<2x4xi64>) {
  // CHECK-DAG: onnx.Constant dense<{{\[}}[1], [4]]> : tensor<2x1xi64>
  // CHECK-DAG: onnx.Constant dense<{{\[}}[0, 1, 2, 9], [3, 4, 5, 9]]> : tensor<2x4xi64>
  // CHECK-NOT: onnx.Slice
  // CHECK-NOT: onnx.Concat
  %data = onnx.Constant dense<[[0, 1, 2], [3, 4, 5]]> : tensor<2x3xi64>
  %starts = onnx.Constant dense<[0, -2]> : tensor<2xi64>
  %ends = onnx.Constant dense<[2, 2]> : tensor<2xi64>
  %axes = onnx.Constant dense<[0, 1]> : tensor<2xi64>
  %steps = onnx.Constant dense<[1, 2]> : tensor<2xi64>
  %s = onnx.Slice %data, %starts, %ends, %axes, %steps : (tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x1xi64>
  %nine = onnx.Constant dense<9> : tensor<2x1xi64>
  %c = onnx.Concat %data, %nine {axis = -1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x4xi64>
  return %s, %c : tensor<2x1xi64>, tensor<2x4xi64>
}
