//===- Fuse.cpp - Fused activations, norms, attention and epilogues -------===//
//
/// Each pattern matches one chain exactly as torch exports it — every
/// constant checked, every intermediate used only inside the chain — and
/// replaces it with the fused op the runtime has a kernel for. The linear
/// epilogue is built in steps (MatMul -> linear, + bias, + activation) so
/// that the order in which the greedy driver visits ops does not matter.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <optional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FUSE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::detail::defOnce;
using mlir::fsdp::detail::scalarOf;

namespace {

bool isScalar(Value value, double expected) {
  std::optional<double> v = scalarOf(value);
  return v &&
         std::abs(*v - expected) <= 1e-6 * std::max(1.0, std::abs(expected));
}

/// Replaces `root` with a new `FusedOp`, which keeps the chain's module and
/// FSDP unit marks (training forms chains after auto-wrap has marked them).
template <typename FusedOp, typename... Args>
void replaceMarked(PatternRewriter &rewriter, Operation *root,
                   Args &&...args) {
  rewriter.setInsertionPoint(root);
  auto fused = rewriter.create<FusedOp>(root->getLoc(),
                                        std::forward<Args>(args)...);
  for (StringRef name : {"fsdp.module", "fsdp.unit"})
    if (Attribute mark = root->getAttr(name))
      fused->setAttr(name, mark);
  rewriter.replaceOp(root, fused->getResults());
}

/// Of a binary op's operands, the one that is not `known` (or nullptr).
Value otherOperand(Operation *op, Value known) {
  if (op->getOperand(0) == known)
    return op->getOperand(1);
  if (op->getOperand(1) == known)
    return op->getOperand(0);
  return nullptr;
}

/// For a commutative binary op with a scalar-constant operand equal to
/// `expected`, the other operand.
Value operandBesideScalar(Operation *op, double expected) {
  if (!op || op->getNumOperands() != 2)
    return nullptr;
  if (isScalar(op->getOperand(1), expected))
    return op->getOperand(0);
  if (isScalar(op->getOperand(0), expected))
    return op->getOperand(1);
  return nullptr;
}

template <typename OpTy> OpTy soleUser(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<OpTy>(*value.getUsers().begin());
}

int64_t lastDim(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape().back();
}

bool isLastAxis(int64_t axis, Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  return axis == -1 || axis == rank - 1;
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5) -> fsdp.gelu.
struct GeluErf : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    auto product = defOnce<MulOp>(operandBesideScalar(root, 0.5));
    if (!product)
      return rewriter.notifyMatchFailure(root, "not x * (...) * 0.5");
    for (int side = 0; side < 2; ++side) {
      Value x = product->getOperand(side);
      auto plus = defOnce<AddOp>(product->getOperand(1 - side));
      auto erf =
          plus ? defOnce<ErfOp>(operandBesideScalar(plus, 1.0)) : nullptr;
      if (!erf)
        continue;
      Operation *scaled =
          erf.getX().hasOneUse() ? erf.getX().getDefiningOp() : nullptr;
      bool byDiv = isa_and_nonnull<DivOp>(scaled) &&
                   scaled->getOperand(0) == x &&
                   isScalar(scaled->getOperand(1), M_SQRT2);
      bool byMul = isa_and_nonnull<MulOp>(scaled) &&
                   operandBesideScalar(scaled, M_SQRT1_2) == x;
      if (!byDiv && !byMul)
        continue;
      replaceMarked<mlir::fsdp::GeluOp>(rewriter, root, root.getType(), x,
                                        "none");
      return success();
    }
    return rewriter.notifyMatchFailure(root, "not GELU's erf form");
  }
};

/// 0.5 * x * (1 + tanh(√(2/π) * (x + 0.044715 * x³))) -> fsdp.gelu tanh.
struct GeluTanh : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    auto product = defOnce<MulOp>(operandBesideScalar(root, 0.5));
    if (!product)
      return rewriter.notifyMatchFailure(root, "not 0.5 * (...)");
    for (int side = 0; side < 2; ++side) {
      Value x = product->getOperand(side);
      auto plus = defOnce<AddOp>(product->getOperand(1 - side));
      auto tanh =
          plus ? defOnce<TanhOp>(operandBesideScalar(plus, 1.0)) : nullptr;
      auto scaled = tanh ? defOnce<MulOp>(tanh.getX()) : nullptr;
      auto inner =
          scaled
              ? defOnce<AddOp>(operandBesideScalar(scaled, 0.7978845608028654))
              : nullptr;
      Value cubeTerm = inner ? otherOperand(inner, x) : nullptr;
      auto cubeScaled = defOnce<MulOp>(cubeTerm);
      Value cube =
          cubeScaled ? operandBesideScalar(cubeScaled, 0.044715) : nullptr;
      if (!cube || !cube.hasOneUse())
        continue;
      bool isCube = false;
      if (auto pow = cube.getDefiningOp<PowOp>())
        isCube = pow.getA() == x && isScalar(pow.getB(), 3.0);
      if (auto mul = cube.getDefiningOp<MulOp>()) {
        auto square = defOnce<MulOp>(otherOperand(mul, x));
        isCube = square && square.getA() == x && square.getB() == x;
      }
      if (!isCube)
        continue;
      replaceMarked<mlir::fsdp::GeluOp>(rewriter, root, root.getType(), x,
                                        "tanh");
      return success();
    }
    return rewriter.notifyMatchFailure(root, "not GELU's tanh form");
  }
};

/// Mul(x, Sigmoid(x)) -> fsdp.silu.
struct Silu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      auto sigmoid = defOnce<SigmoidOp>(root->getOperand(side));
      if (sigmoid && sigmoid.getX() == root->getOperand(1 - side) &&
          sigmoid.getX().getType() == root.getType()) {
        replaceMarked<mlir::fsdp::SiluOp>(rewriter, root, root.getType(),
                                          sigmoid.getX());
        return success();
      }
    }
    return rewriter.notifyMatchFailure(root, "not x * sigmoid(x)");
  }
};

//===----------------------------------------------------------------------===//
// Normalisations
//===----------------------------------------------------------------------===//

/// The square of `x` as Pow(x, 2) or Mul(x, x).
bool isSquareOf(Value square, Value x) {
  if (auto pow = square.getDefiningOp<PowOp>())
    return pow.getA() == x && isScalar(pow.getB(), 2.0);
  if (auto mul = square.getDefiningOp<MulOp>())
    return mul.getA() == x && mul.getB() == x;
  return false;
}

/// ReduceMean over exactly the last axis, keeping it.
bool isMeanOverLast(ReduceMeanOp mean) {
  auto axes = mean.getAxes();
  return mean.getKeepdims() == 1 && axes && axes->size() == 1 &&
         isLastAxis((*axes)[0], mean.getData());
}

/// x * (1 / sqrt(mean(x²) + eps)) [* scale] -> fsdp.rms_norm.
struct RMSNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp root,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      Value x = root->getOperand(side);
      Value inverse = root->getOperand(1 - side);
      if (!inverse.hasOneUse() || x.getType() != root.getType())
        continue;
      Value root2;
      if (auto div = inverse.getDefiningOp<DivOp>();
          div && isScalar(div.getA(), 1.0))
        root2 = div.getB();
      else if (auto rec = inverse.getDefiningOp<ReciprocalOp>())
        root2 = rec.getX();
      auto sqrt = defOnce<SqrtOp>(root2);
      auto plus = sqrt ? defOnce<AddOp>(sqrt.getX()) : nullptr;
      if (!plus)
        continue;
      Value meanValue;
      std::optional<double> eps;
      for (int k = 0; k < 2 && !eps; ++k)
        if ((eps = scalarOf(plus->getOperand(k))))
          meanValue = plus->getOperand(1 - k);
      auto mean = eps ? defOnce<ReduceMeanOp>(meanValue) : nullptr;
      if (!mean || !isMeanOverLast(mean) || !mean.getData().hasOneUse() ||
          !isSquareOf(mean.getData(), x))
        continue;
      // A following Mul by a vector of the last dimension is the weight.
      Operation *replaced = root;
      Value scale;
      if (auto next = soleUser<MulOp>(root.getResult())) {
        Value w = otherOperand(next, root.getResult());
        auto type = w ? dyn_cast<RankedTensorType>(w.getType()) : nullptr;
        if (type && type.getRank() == 1 && type.getDimSize(0) == lastDim(x) &&
            next.getType() == root.getType()) {
          scale = w;
          replaced = next;
        }
      }
      replaceMarked<mlir::fsdp::RMSNormOp>(rewriter, replaced, root.getType(),
                                           x, scale,
                                           rewriter.getF32FloatAttr(*eps));
      return success();
    }
    return rewriter.notifyMatchFailure(root, "not an RMSNorm chain");
  }
};

/// (x - mean(x)) / sqrt(mean((x - mean)²) + eps) [* scale] [+ bias] over
/// the last axis -> onnx.LayerNormalization.
struct LayerNorm : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp root,
                                PatternRewriter &rewriter) const override {
    auto centered = root.getA().getDefiningOp<SubOp>();
    auto sqrt = defOnce<SqrtOp>(root.getB());
    if (!centered || !sqrt)
      return rewriter.notifyMatchFailure(root, "not (x - mean) / sqrt(...)");
    Value x = centered.getA();
    auto mean = defOnce<ReduceMeanOp>(centered.getB());
    auto plus = defOnce<AddOp>(sqrt.getX());
    if (!mean || mean.getData() != x || !isMeanOverLast(mean) || !plus ||
        x.getType() != root.getType())
      return rewriter.notifyMatchFailure(root, "no mean over the last axis");
    Value varValue;
    std::optional<double> eps;
    for (int k = 0; k < 2 && !eps; ++k)
      if ((eps = scalarOf(plus->getOperand(k))))
        varValue = plus->getOperand(1 - k);
    auto var = eps ? defOnce<ReduceMeanOp>(varValue) : nullptr;
    if (!var || !isMeanOverLast(var) || !var.getData().hasOneUse() ||
        !isSquareOf(var.getData(), centered.getResult()))
      return rewriter.notifyMatchFailure(root,
                                         "no variance over the last axis");
    Operation *square = var.getData().getDefiningOp();
    for (Operation *user : centered->getUsers())
      if (user != root && user != square)
        return rewriter.notifyMatchFailure(root, "x - mean has other users");

    auto isVector = [&](Value v) {
      auto type = v ? dyn_cast<RankedTensorType>(v.getType()) : nullptr;
      return type && type.getRank() == 1 && type.getDimSize(0) == lastDim(x);
    };
    Operation *last = root;
    Value scale, bias;
    if (auto mul = soleUser<MulOp>(root.getResult());
        mul && isVector(otherOperand(mul, root.getResult())) &&
        mul.getType() == root.getType()) {
      scale = otherOperand(mul, root.getResult());
      last = mul;
    }
    if (auto add = soleUser<AddOp>(last->getResult(0));
        add && isVector(otherOperand(add, last->getResult(0))) &&
        add.getType() == root.getType()) {
      bias = otherOperand(add, last->getResult(0));
      last = add;
    }
    auto type = cast<RankedTensorType>(root.getType());
    Location loc = last->getLoc();
    rewriter.setInsertionPoint(last);
    if (!scale) {
      auto ones = RankedTensorType::get({lastDim(x)}, type.getElementType());
      scale = rewriter.create<ConstantOp>(
          loc, DenseElementsAttr::get(
                   ones, rewriter.getFloatAttr(type.getElementType(), 1.0)));
    }
    if (!bias)
      bias = rewriter.create<NoValueOp>(loc);
    Type none = rewriter.getNoneType();
    auto norm = rewriter.create<LayerNormalizationOp>(
        loc, TypeRange{type, none, none}, ValueRange{x, scale, bias},
        ArrayRef<NamedAttribute>{
            rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(-1)),
            rewriter.getNamedAttr("epsilon", rewriter.getF32FloatAttr(*eps))});
    rewriter.replaceOp(last, norm.getY());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// MatMul(Softmax(mask(MatMul(q, kt) * s)), v) -> fsdp.attention (the
/// matcher fsdp-autodiff shares), with the head split's and merge's
/// transposes folded into its layout where the chain has them. The mask
/// stays as exported: inference plans keep their `fill` masks.
struct Attention : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp root,
                                PatternRewriter &rewriter) const override {
    std::string why;
    FailureOr<mlir::fsdp::detail::AttentionChain> chain =
        mlir::fsdp::detail::matchAttention(root, why);
    if (failed(chain))
      return rewriter.notifyMatchFailure(root, why);
    // Without the transposes around it the chain still fuses, head-first.
    mlir::fsdp::detail::foldHeadTransposes(*chain, why);
    rewriter.setInsertionPoint(root);
    auto attention = mlir::fsdp::detail::buildAttention(rewriter, *chain,
                                                        /*withLse=*/false);
    if (chain->headMerge) {
      rewriter.replaceOp(chain->headMerge, attention.getOutput());
      rewriter.eraseOp(root);
    } else {
      rewriter.replaceOp(root, attention.getOutput());
    }
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Transposes read by GEMMs
//===----------------------------------------------------------------------===//

/// The input of `value` when it is a 2-D Transpose (perm [1, 0]).
Value transposedFrom(Value value) {
  auto t = value.getDefiningOp<TransposeOp>();
  if (!t || cast<RankedTensorType>(value.getType()).getRank() != 2)
    return nullptr;
  SmallVector<int64_t> perm = t.getPermOrDefault();
  return perm[0] == 1 && perm[1] == 0 ? t.getData() : nullptr;
}

/// `value` transposed (2-D): the input of a Transpose that already made it,
/// else a new Transpose.
Value transpose2D(PatternRewriter &rewriter, Location loc, Value value) {
  if (Value from = transposedFrom(value))
    return from;
  auto type = cast<RankedTensorType>(value.getType());
  return rewriter.create<TransposeOp>(
      loc,
      RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                            type.getElementType()),
      value, rewriter.getDenseI64ArrayAttr({1, 0}));
}

/// A 2-D operand of a type the gemm kernel takes (f32, bf16, f16: not the
/// f64 or integer products only matmul runs).
bool is2D(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Type element = type.getElementType();
  return type.getRank() == 2 &&
         (element.isF32() || element.isBF16() || element.isF16());
}

/// Transpose(Transpose(x)) -> one Transpose of x by the composed
/// permutation, or x itself: what the gradient of MatMul(x, Transpose(w))
/// (dx = g Transpose(Transpose(w))) and of a Transpose produce.
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp root,
                                PatternRewriter &rewriter) const override {
    auto inner = root.getData().getDefiningOp<TransposeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(root, "input is not a Transpose");
    SmallVector<int64_t> outer = root.getPermOrDefault(),
                         first = inner.getPermOrDefault(), perm;
    bool identity = true;
    for (int64_t d = 0, e = outer.size(); d < e; ++d) {
      perm.push_back(first[outer[d]]);
      identity &= perm.back() == d;
    }
    if (identity && inner.getData().getType() == root.getType()) {
      rewriter.replaceOp(root, inner.getData());
      return success();
    }
    rewriter.replaceOpWithNewOp<TransposeOp>(
        root, root.getType(), inner.getData(),
        rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// Transpose(MatMul(a, b)) of 2-D operands -> MatMul(b^T, a^T): the
/// weight gradient of MatMul(x, Transpose(w)), (x^T g)^T = g^T x, computed
/// in the layout it is stored in. The operands' transposes become GEMM
/// flags (GemmFromTransposes).
struct TransposedProduct : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp root,
                                PatternRewriter &rewriter) const override {
    auto product = defOnce<MatMulOp>(root.getData());
    if (!transposedFrom(root.getResult()) || !product ||
        !is2D(product.getA()) || !is2D(product.getB()))
      return rewriter.notifyMatchFailure(root,
                                         "not the 2-D transpose of a 2-D product");
    Value a = transpose2D(rewriter, root.getLoc(), product.getB());
    Value b = transpose2D(rewriter, root.getLoc(), product.getA());
    rewriter.replaceOpWithNewOp<MatMulOp>(root, root.getType(), a, b);
    return success();
  }
};

/// MatMul(Transpose(a), b) of 2-D operands -> Gemm(a, b) with transA (and
/// transB when b is a Transpose too): the GEMM reads a transposed in place
/// (the weight gradient, a^T g). A transposed b alone is fsdp.linear's
/// transpose_weight (LinearFromMatMul).
struct GemmFromTransposes : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp root,
                                PatternRewriter &rewriter) const override {
    Value a = transposedFrom(root.getA());
    if (!a || !is2D(a) || !is2D(root.getB()))
      return rewriter.notifyMatchFailure(root, "not a 2-D product of a^T");
    Value b = transposedFrom(root.getB());
    auto none = rewriter.create<NoValueOp>(root.getLoc(),
                                           rewriter.getNoneType());
    rewriter.replaceOpWithNewOp<GemmOp>(
        root, root.getType(), a, b ? b : root.getB(), none,
        rewriter.getF32FloatAttr(1.0), rewriter.getF32FloatAttr(1.0),
        rewriter.getI64IntegerAttr(1), rewriter.getI64IntegerAttr(b ? 1 : 0));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Linear epilogues
//===----------------------------------------------------------------------===//

/// MatMul(x, Transpose(w)) or MatMul(x, w) with a 2-D weight -> fsdp.linear.
struct LinearFromMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp root,
                                PatternRewriter &rewriter) const override {
    auto input = cast<RankedTensorType>(root.getA().getType());
    auto weight = cast<RankedTensorType>(root.getB().getType());
    if (input.getRank() < 2 || weight.getRank() != 2)
      return rewriter.notifyMatchFailure(root, "not activations x 2-D weight");
    Value w = root.getB();
    bool transposed = false;
    if (auto t = w.getDefiningOp<TransposeOp>()) {
      auto perm = t.getPerm();
      if (perm && perm->size() == 2 && (*perm)[0] == 1 && (*perm)[1] == 0) {
        w = t.getData();
        transposed = true;
      }
    }
    auto linear = rewriter.create<mlir::fsdp::LinearOp>(
        root.getLoc(), root.getType(), root.getA(), w, Value(), transposed,
        "none");
    rewriter.replaceOp(root, linear.getResult());
    return success();
  }
};

/// Gemm(x, w, b) with transB = 1 (nn.Linear on 2-D input) -> fsdp.linear.
struct LinearFromGemm : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GemmOp root,
                                PatternRewriter &rewriter) const override {
    if (root.getTransA() != 0 || root.getAlpha().convertToDouble() != 1.0 ||
        root.getBeta().convertToDouble() != 1.0)
      return rewriter.notifyMatchFailure(root, "scaled or transposed A");
    Value bias = root.getC();
    if (isa<NoneType>(bias.getType())) {
      bias = Value();
    } else {
      auto type = cast<RankedTensorType>(bias.getType());
      if (type.getRank() != 1 ||
          type.getDimSize(0) != lastDim(root.getResult()))
        return rewriter.notifyMatchFailure(root, "C is not a bias vector");
    }
    auto linear = rewriter.create<mlir::fsdp::LinearOp>(
        root.getLoc(), root.getType(), root.getA(), root.getB(), bias,
        root.getTransB() != 0, "none");
    rewriter.replaceOp(root, linear.getResult());
    return success();
  }
};

/// Add(linear, bias) -> linear with bias (before any activation).
struct LinearBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp root,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      auto linear = defOnce<mlir::fsdp::LinearOp>(root->getOperand(side));
      Value bias = root->getOperand(1 - side);
      auto type = dyn_cast<RankedTensorType>(bias.getType());
      if (!linear || linear.getBias() || linear.getActivation() != "none" ||
          !type || type.getRank() != 1 ||
          type.getDimSize(0) != lastDim(linear.getResult()) ||
          root.getType() != linear.getType())
        continue;
      auto fused = rewriter.create<mlir::fsdp::LinearOp>(
          root.getLoc(), root.getType(), linear.getInput(), linear.getWeight(),
          bias, linear.getTransposeWeight(), "none");
      rewriter.replaceOp(root, fused.getResult());
      return success();
    }
    return rewriter.notifyMatchFailure(root, "not linear + bias vector");
  }
};

/// act(linear) -> linear with that activation.
struct LinearActivation : RewritePattern {
  LinearActivation(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    StringRef activation =
        llvm::TypeSwitch<Operation *, StringRef>(op)
            .Case<ReluOp>([](auto) { return "relu"; })
            .Case<TanhOp>([](auto) { return "tanh"; })
            .Case<SigmoidOp>([](auto) { return "sigmoid"; })
            .Case<mlir::fsdp::SiluOp>([](auto) { return "silu"; })
            .Case<mlir::fsdp::GeluOp>([](mlir::fsdp::GeluOp gelu) {
              return gelu.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
            })
            .Default([](Operation *) { return ""; });
    if (activation.empty() || op->getNumOperands() != 1)
      return failure();
    auto linear = defOnce<mlir::fsdp::LinearOp>(op->getOperand(0));
    if (!linear || linear.getActivation() != "none")
      return rewriter.notifyMatchFailure(op, "not an activation of a linear");
    auto fused = rewriter.create<mlir::fsdp::LinearOp>(
        op->getLoc(), op->getResult(0).getType(), linear.getInput(),
        linear.getWeight(), linear.getBias(), linear.getTransposeWeight(),
        activation);
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

} // namespace

void mlir::fsdp::detail::addTrainableChains(RewritePatternSet &patterns) {
  patterns.add<GeluErf, GeluTanh, Silu, RMSNorm>(patterns.getContext());
}

namespace {

struct FusePass : mlir::fsdp::impl::FuseBase<FusePass> {
  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    // Chains first (their intermediate MatMuls and Adds must still be
    // there), then the epilogues that absorb what the chains produced.
    RewritePatternSet chains(&getContext());
    mlir::fsdp::detail::addTrainableChains(chains);
    chains.add<LayerNorm, Attention>(&getContext());
    // Then the transposes that GEMMs can read in place, before the
    // epilogues turn their MatMuls into fsdp.linear.
    RewritePatternSet transposes(&getContext());
    transposes.add<ComposeTransposes, TransposedProduct, GemmFromTransposes>(
        &getContext());
    RewritePatternSet epilogues(&getContext());
    epilogues
        .add<LinearFromMatMul, LinearFromGemm, LinearBias, LinearActivation>(
            &getContext());
    if (failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(chains))) ||
        failed(applyPatternsAndFoldGreedily(getOperation(),
                                            std::move(transposes))) ||
        failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(epilogues))))
      signalPassFailure();
  }
};

} // namespace
