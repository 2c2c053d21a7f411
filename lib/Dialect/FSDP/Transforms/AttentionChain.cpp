//===- AttentionChain.cpp - Attention as torch exports it -----------------===//
//
/// Matches `MatMul(Softmax(mask(MatMul(q, kt) * s)), v)` exactly as torch
/// exports it (the mask an Add or a Where filling a scalar; the scale a Mul
/// or a Div by a scalar), and recognises the causal mask among constants.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"
#include "OnnxBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

using namespace mlir;
using namespace mlir::onnxir;
using namespace mlir::fsdp::detail;

std::optional<double> mlir::fsdp::detail::scalarOf(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

namespace {

using mlir::fsdp::detail::constantInts;

/// Masks larger than this many elements are not evaluated (a causal mask of
/// a 2048-token context has 4M; the check is one pass over them).
constexpr int64_t kMaxMaskElements = int64_t(1) << 24;

/// A boolean tensor's values in row-major order.
using BoolValues = std::vector<bool>;

/// The values of a boolean tensor computed from constants by Not, Slice
/// and reshapes (what the importer leaves of torch's `~mask[:, :, :T, :T]`),
/// or nothing when it is not one.
std::optional<BoolValues> evaluateMask(Value value);

/// Slice with constant starts, ends, axes and steps, any rank.
std::optional<BoolValues> evaluateSlice(SliceOp slice) {
  auto in = dyn_cast<RankedTensorType>(slice.getData().getType());
  auto out = dyn_cast<RankedTensorType>(slice.getType());
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape())
    return std::nullopt;
  std::optional<BoolValues> data = evaluateMask(slice.getData());
  std::optional<SmallVector<int64_t>> starts = constantInts(slice.getStarts());
  std::optional<SmallVector<int64_t>> ends = constantInts(slice.getEnds());
  if (!data || !starts || !ends)
    return std::nullopt;
  int64_t rank = in.getRank();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (isa<NoneType>(slice.getAxes().getType())) {
    for (int64_t i = 0; i < static_cast<int64_t>(starts->size()); ++i)
      axes.push_back(i);
  } else if (auto given = constantInts(slice.getAxes())) {
    axes = *given;
  } else {
    return std::nullopt;
  }
  if (!isa<NoneType>(slice.getSteps().getType())) {
    auto given = constantInts(slice.getSteps());
    if (!given)
      return std::nullopt;
    steps = *given;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size())
    return std::nullopt;
  SmallVector<int64_t> first(rank, 0), step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (axis < 0 || axis >= rank || steps[k] == 0)
      return std::nullopt;
    int64_t size = in.getDimSize(axis), s = (*starts)[k];
    if (s < 0)
      s += size;
    first[axis] = steps[k] > 0 ? std::clamp<int64_t>(s, 0, size)
                               : std::clamp<int64_t>(s, 0, size - 1);
    step[axis] = steps[k];
  }
  // The extents are the result type's (shape inference worked them out);
  // every index they reach must lie inside the input.
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = out.getDimSize(d);
    int64_t last = first[d] + (n - 1) * step[d];
    if (n > 0 && (last < 0 || last >= in.getDimSize(d)))
      return std::nullopt;
  }
  BoolValues result(out.getNumElements());
  SmallVector<int64_t> inStrides(rank, 1);
  for (int64_t d = rank - 1; d > 0; --d)
    inStrides[d - 1] = inStrides[d] * in.getDimSize(d);
  for (int64_t i = 0; i < out.getNumElements(); ++i) {
    int64_t rest = i, at = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % out.getDimSize(d);
      rest /= out.getDimSize(d);
      at += (first[d] + coord * step[d]) * inStrides[d];
    }
    result[i] = (*data)[at];
  }
  return result;
}

std::optional<BoolValues> evaluateMask(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() > kMaxMaskElements ||
      !type.getElementType().isInteger(1))
    return std::nullopt;
  Operation *def = value.getDefiningOp();
  if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
    auto dense = dyn_cast<DenseIntElementsAttr>(constant.getValue());
    if (!dense)
      return std::nullopt;
    BoolValues out;
    out.reserve(type.getNumElements());
    if (dense.isSplat())
      out.assign(type.getNumElements(), dense.getSplatValue<bool>());
    else
      for (bool v : dense.getValues<bool>())
        out.push_back(v);
    return out;
  }
  if (auto notOp = dyn_cast_or_null<NotOp>(def)) {
    std::optional<BoolValues> in = evaluateMask(notOp.getX());
    if (in)
      in->flip();
    return in;
  }
  if (auto slice = dyn_cast_or_null<SliceOp>(def))
    return evaluateSlice(slice);
  // Reshapes keep the row-major order of the elements.
  if (auto view = dyn_cast_or_null<ViewLikeOpInterface>(def))
    return evaluateMask(view.getViewSource());
  return std::nullopt;
}

} // namespace

namespace mlir::fsdp::detail {

FailureOr<AttentionChain> matchAttention(MatMulOp root, std::string &why) {
  auto fail = [&](StringRef reason) {
    why = reason.str();
    return failure();
  };
  AttentionChain chain;
  chain.ops.push_back(root);
  auto softmax = defOnce<SoftmaxOp>(root.getA());
  int64_t softmaxRank =
      softmax ? cast<RankedTensorType>(softmax.getInput().getType()).getRank()
              : 0;
  // The attribute is signed (-1: the last axis) though its getter is not.
  int64_t axis = softmax ? static_cast<int64_t>(softmax.getAxis()) : 0;
  if (!softmax || !(axis == -1 || axis == softmaxRank - 1))
    return fail("not softmax(...) @ v");
  chain.ops.push_back(softmax);
  Value scores = softmax.getInput();
  if (auto where = defOnce<WhereOp>(scores)) {
    std::optional<double> value = scalarOf(where.getX());
    if (!value)
      return fail("Where without a fill scalar");
    chain.mask = where.getCondition();
    chain.kind = "fill";
    chain.fill = *value;
    scores = where.getY();
    chain.ops.push_back(where);
  } else if (auto add = defOnce<AddOp>(scores)) {
    // The side that is a (scaled) q @ kt product is the scores.
    for (int side = 0; side < 2; ++side) {
      Operation *def = add->getOperand(side).getDefiningOp();
      if (isa_and_nonnull<MulOp, DivOp, MatMulOp>(def)) {
        scores = add->getOperand(side);
        chain.mask = add->getOperand(1 - side);
        chain.kind = "add";
        break;
      }
    }
    if (chain.kind != "add")
      return fail("Add is not a mask");
    chain.ops.push_back(add);
  }
  if (!scores.hasOneUse())
    return fail("scores have other users");
  if (auto mul = scores.getDefiningOp<MulOp>()) {
    for (int side = 0; side < 2; ++side)
      if (std::optional<double> s = scalarOf(mul->getOperand(side))) {
        chain.scale = *s;
        scores = mul->getOperand(1 - side);
        chain.ops.push_back(mul);
        break;
      }
  } else if (auto div = scores.getDefiningOp<DivOp>()) {
    std::optional<double> d = scalarOf(div.getB());
    if (!d || *d == 0.0)
      return fail("scaling is not a scalar");
    chain.scale = 1.0 / *d;
    scores = div.getA();
    chain.ops.push_back(div);
  }
  auto product = defOnce<MatMulOp>(scores);
  if (!product)
    return fail("no q @ k_t product");
  chain.ops.push_back(product);
  chain.q = product.getA();
  chain.kt = product.getB();
  chain.v = root.getB();
  auto qt = cast<RankedTensorType>(chain.q.getType());
  auto ktt = cast<RankedTensorType>(chain.kt.getType());
  auto vt = cast<RankedTensorType>(chain.v.getType());
  int64_t rank = qt.getRank();
  if (rank < 2 || ktt.getRank() != rank || vt.getRank() != rank ||
      qt.getShape().drop_back(2) != ktt.getShape().drop_back(2) ||
      qt.getShape().drop_back(2) != vt.getShape().drop_back(2))
    return fail("batch dimensions differ");
  if (chain.mask) {
    auto mt = cast<RankedTensorType>(chain.mask.getType());
    bool boolean = mt.getElementType().isInteger(1);
    if (mt.getRank() > rank || boolean != (chain.kind == "fill") ||
        (!boolean && mt.getElementType() != qt.getElementType()))
      return fail("unsupported mask");
  }
  return chain;
}

bool makeCausal(AttentionChain &chain) {
  if (chain.kind != "fill" || !std::isinf(chain.fill) || chain.fill > 0)
    return false;
  auto mt = cast<RankedTensorType>(chain.mask.getType());
  auto qt = cast<RankedTensorType>(chain.q.getType());
  auto ktt = cast<RankedTensorType>(chain.kt.getType());
  int64_t l = qt.getShape()[qt.getRank() - 2];
  int64_t s = ktt.getShape().back();
  if (mt.getRank() < 2 || l != s || mt.getShape()[mt.getRank() - 2] != l ||
      mt.getShape().back() != s)
    return false;
  std::optional<BoolValues> values = evaluateMask(chain.mask);
  if (!values)
    return false;
  // Every [L, S] slice (the mask's leading dims broadcast) is j > i.
  for (size_t at = 0; at < values->size(); ++at) {
    int64_t i = static_cast<int64_t>(at) / s % l;
    int64_t j = static_cast<int64_t>(at) % s;
    if ((*values)[at] != (j > i))
      return false;
  }
  chain.kind = "causal";
  chain.mask = nullptr;
  chain.fill = 0.0;
  return true;
}

/// The tensor that one Transpose, or two in a row, permute by `perm` into
/// `value` (dim d of `value` is dim perm[d] of it), or null.
static Value transposedBy(Value value, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> composed =
      llvm::to_vector(llvm::seq<int64_t>(0, static_cast<int64_t>(perm.size())));
  for (int depth = 0; depth < 2; ++depth) {
    auto t = value.getDefiningOp<TransposeOp>();
    if (!t)
      return nullptr;
    SmallVector<int64_t> inner = t.getPermOrDefault();
    if (inner.size() != perm.size())
      return nullptr;
    // The transpose before this one's outputs: dim d of the result is dim
    // inner[composed[d]] of t's input.
    for (int64_t &d : composed)
      d = inner[d];
    value = t.getData();
    if (ArrayRef<int64_t>(composed) == perm)
      return value;
  }
  return nullptr;
}

bool foldHeadTransposes(AttentionChain &chain, std::string &why) {
  auto fail = [&](const char *reason) {
    why = reason;
    return false;
  };
  if (cast<RankedTensorType>(chain.q.getType()).getRank() != 4)
    return fail("not rank-4 [B, H, L, D] heads");
  const int64_t toHeads[] = {0, 2, 1, 3}, toKeysT[] = {0, 2, 3, 1};
  Value q = transposedBy(chain.q, toHeads), v = transposedBy(chain.v, toHeads);
  Value k = transposedBy(chain.kt, toKeysT);
  if (!q || !k || !v)
    return fail("q, k_t or v is not a head split's transpose");
  Value y = chain.ops.front()->getResult(0);
  if (!y.hasOneUse())
    return fail("the output has other uses than the head merge");
  auto merge = dyn_cast<TransposeOp>(*y.getUsers().begin());
  if (!merge ||
      ArrayRef<int64_t>(merge.getPermOrDefault()) != ArrayRef<int64_t>(toHeads))
    return fail("the output is not transposed back by the head merge");
  chain.q = q, chain.kt = k, chain.v = v;
  chain.layout = "bshd";
  chain.headMerge = merge;
  return true;
}

AttentionOp buildAttention(OpBuilder &b, const AttentionChain &chain,
                           bool withLse) {
  Operation *root = chain.ops.front();
  Type output =
      (chain.headMerge ? chain.headMerge : root)->getResult(0).getType();
  // lse is head-first, [B, H, L], in either layout.
  auto heads = cast<RankedTensorType>(root->getResult(0).getType());
  Type lse = withLse ? RankedTensorType::get(heads.getShape().drop_back(),
                                             b.getF32Type())
                     : Type();
  return b.create<AttentionOp>(
      root->getLoc(), output, lse, chain.q, chain.kt, chain.v, chain.mask,
      b.getF32FloatAttr(chain.scale), b.getStringAttr(chain.kind),
      b.getF32FloatAttr(chain.fill), b.getStringAttr(chain.layout));
}

} // namespace mlir::fsdp::detail
