//===- GradientOpInterface.td - Reverse-mode rule of an op -*- tablegen -*-===//
//
// The per-op half of fsdp-autodiff: the pass owns the sweep (which values
// are active, the reverse order, summing cotangents, activation
// checkpointing) and asks each op it meets for its rule through this
// interface. The rules are external models (lib/Dialect/FSDP/Transforms/
// Gradients), so that neither the onnx nor the fsdp dialect library depends
// on the builders the rules use.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE
#define FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    An op that fsdp-autodiff can differentiate. Its `backward` builds, with
    the context's builder (before the function's return), the ops that turn
    the cotangents of its results into cotangents of its active operands,
    and hands each to `GradientContext::accumulate`. An op on the path from
    a trainable parameter to the loss without this interface is an error.

    For example, `%y = onnx.Mul(%a, %b)` with cotangent `%g` gives
    `onnx.Mul(%g, %b)` to `%a` and `onnx.Mul(%g, %a)` to `%b` (each summed
    over the dimensions broadcasting stretched), but only to the active ones.

    The rules are external models in `lib/Dialect/FSDP/Transforms/Gradients`,
    one `backward(XOp, GradientContext &)` per op in its family's file,
    which attaches it with `attachGradient<XOp, backward>`; every
    `ViewLikeOpInterface` op of the onnx and fsdp dialects gets the view
    rule (a reshape back to its source's shape).
  }];
  let cppNamespace = "::mlir::fsdp";

  let methods = [
    InterfaceMethod<[{
        Builds the op's gradient rule: reads the cotangents of its results
        from `ctx` and accumulates those of its active operands. Fails (with
        an error naming the op) where the op's attributes or operands have
        no rule.
      }],
      "::mlir::LogicalResult", "backward",
      (ins "::mlir::fsdp::GradientContext &":$ctx)>,
    InterfaceMethod<[{
        Whether `backward` reads the cotangent of every result (a result
        the loss does not reach reading as zeros), as Split's rule does.
        Otherwise the sweep calls it only when the first result has a
        cotangent, and refuses an op whose other results are active and
        used.
      }],
      "bool", "differentiatesEveryResult", (ins), [{}],
      [{ return false; }]>,
  ];
}

#endif // FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE
