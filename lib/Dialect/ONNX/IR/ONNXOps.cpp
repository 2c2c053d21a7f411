//===- ONNXOps.cpp - The onnx dialect: verifiers --------------------------===//
//
// Verifiers check what ONNX's shape inference already promised, so that IR
// written by hand or rewritten by a pass cannot drift from the operators'
// contracts. Dynamic dimensions are accepted wherever ONNX accepts them.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::onnxir;

#include "fsdp/Dialect/ONNX/IR/ONNXOpsDialect.cpp.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/ONNX/IR/ONNXOps.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/ONNX/IR/ONNXOps.cpp.inc"
      >();
}

Operation *ONNXDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  if (isa<NoneType>(type))
    return builder.create<NoValueOp>(loc, type);
  if (auto elements = dyn_cast<ElementsAttr>(value))
    if (elements.getType() == type)
      return builder.create<ConstantOp>(loc, type, elements);
  return nullptr;
}

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Checks `axis` lies in [-rank, rank) (or [-rank, rank] with `inclusive`)
/// and returns it normalized to be non-negative.
FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis, int64_t rank,
                                 bool inclusive = false) {
  int64_t upper = inclusive ? rank + 1 : rank;
  if (axis < -rank || axis >= upper)
    return op->emitOpError() << "axis " << axis << " is out of range for rank "
                             << rank;
  return axis < 0 ? axis + rank : axis;
}

/// Two dimensions that must agree: equal, or either dynamic.
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

LogicalResult checkResultShape(Operation *op, ArrayRef<int64_t> expected) {
  RankedTensorType result = tensorType(op->getResult(0));
  if (result.getRank() != static_cast<int64_t>(expected.size()) ||
      !llvm::all_of(llvm::zip(result.getShape(), expected), [](auto dims) {
        return compatible(std::get<0>(dims), std::get<1>(dims));
      }))
    return op->emitOpError() << "result type " << result
                             << " does not match the inferred shape ["
                             << llvm::make_range(expected.begin(), expected.end())
                             << "]";
  return success();
}

} // namespace

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError() << "value type " << getValue().getType()
                         << " differs from result type " << getType();
  return success();
}

LogicalResult MatMulOp::verify() {
  RankedTensorType a = tensorType(getA()), b = tensorType(getB());
  if (a.getElementType() != b.getElementType())
    return emitOpError() << "operand element types differ: "
                         << a.getElementType() << " and " << b.getElementType();
  if (a.getRank() == 0 || b.getRank() == 0)
    return emitOpError() << "operands must have rank >= 1";
  int64_t k = a.getShape().back();
  int64_t kB = b.getRank() == 1 ? b.getShape()[0] : b.getShape()[b.getRank() - 2];
  if (!compatible(k, kB))
    return emitOpError() << "contracting dimensions differ: " << k << " and "
                         << kB;
  // numpy.matmul: batch dimensions broadcast; 1-D operands lose their dim.
  SmallVector<int64_t> batchA(a.getShape().drop_back(std::min<int64_t>(2, a.getRank())));
  SmallVector<int64_t> batchB(b.getShape().drop_back(std::min<int64_t>(2, b.getRank())));
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(batchA, batchB, shape))
    return emitOpError() << "batch dimensions do not broadcast";
  if (a.getRank() >= 2)
    shape.push_back(a.getShape()[a.getRank() - 2]);
  if (b.getRank() >= 2)
    shape.push_back(b.getShape().back());
  return checkResultShape(*this, shape);
}

LogicalResult GemmOp::verify() {
  RankedTensorType a = tensorType(getA()), b = tensorType(getB());
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOpError() << "A and B must be 2-D, got " << a << " and " << b;
  int64_t m = a.getShape()[getTransA() ? 1 : 0];
  int64_t k = a.getShape()[getTransA() ? 0 : 1];
  int64_t kB = b.getShape()[getTransB() ? 1 : 0];
  int64_t n = b.getShape()[getTransB() ? 0 : 1];
  if (!compatible(k, kB))
    return emitOpError() << "contracting dimensions differ: " << k << " and "
                         << kB;
  return checkResultShape(*this, {m, n});
}

template <typename AxisOp>
static LogicalResult verifyAxisOp(AxisOp op) {
  return normalizeAxis(op, op.getAxis(), tensorType(op.getInput()).getRank());
}
LogicalResult SoftmaxOp::verify() { return verifyAxisOp(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxisOp(*this); }
LogicalResult HardmaxOp::verify() { return verifyAxisOp(*this); }

LogicalResult LayerNormalizationOp::verify() {
  RankedTensorType x = tensorType(getX());
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), x.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = x.getShape().drop_front(*axis);
  RankedTensorType scale = tensorType(getScale());
  if (scale.getRank() != static_cast<int64_t>(normalized.size()) ||
      !llvm::all_of(llvm::zip(scale.getShape(), normalized), [](auto dims) {
        return compatible(std::get<0>(dims), std::get<1>(dims));
      }))
    return emitOpError() << "Scale " << scale
                         << " does not match the normalized dimensions of "
                         << x;
  return checkResultShape(*this, x.getShape());
}

LogicalResult ConvOp::verify() {
  RankedTensorType x = tensorType(getX()), w = tensorType(getW());
  if (x.getRank() < 3 || w.getRank() != x.getRank())
    return emitOpError() << "X and W must have the same rank >= 3, got " << x
                         << " and " << w;
  if (getGroup() < 1)
    return emitOpError() << "group must be positive, got " << getGroup();
  int64_t channels = x.getShape()[1], perGroup = w.getShape()[1];
  if (!ShapedType::isDynamic(channels) && !ShapedType::isDynamic(perGroup) &&
      channels != perGroup * getGroup())
    return emitOpError() << "X has " << channels << " channels but W expects "
                         << perGroup << " x group " << getGroup();
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorType(getData()), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from the input's " << in.getElementType();
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError() << "reshapes " << in.getNumElements()
                         << " elements into " << out << " ("
                         << out.getNumElements() << " elements)";
  return success();
}

LogicalResult FlattenOp::verify() {
  RankedTensorType in = tensorType(getInput());
  FailureOr<int64_t> axis =
      normalizeAxis(*this, getAxis(), in.getRank(), /*inclusive=*/true);
  if (failed(axis))
    return failure();
  if (getType().getRank() != 2)
    return emitOpError() << "result must be 2-D, got " << getType();
  return success();
}

SmallVector<int64_t> TransposeOp::getPermOrDefault() {
  if (std::optional<ArrayRef<int64_t>> given = getPerm())
    return SmallVector<int64_t>(*given);
  SmallVector<int64_t> perm;
  for (int64_t i = tensorType(getData()).getRank() - 1; i >= 0; --i)
    perm.push_back(i);
  return perm;
}

LogicalResult TransposeOp::verify() {
  RankedTensorType in = tensorType(getData());
  int64_t rank = in.getRank();
  SmallVector<int64_t> perm = getPermOrDefault();
  if (static_cast<int64_t>(perm.size()) != rank)
    return emitOpError() << "perm has " << perm.size() << " entries for rank "
                         << rank;
  SmallVector<bool> seen(rank, false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOpError() << "perm is not a permutation of [0, " << rank << ")";
    seen[p] = true;
    shape.push_back(in.getShape()[p]);
  }
  return checkResultShape(*this, shape);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType first = tensorType(getInputs().front());
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (Value input : getInputs().drop_front()) {
    RankedTensorType type = tensorType(input);
    if (type.getRank() != first.getRank())
      return emitOpError() << "inputs have different ranks: " << first
                           << " and " << type;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (d == *axis) {
        shape[d] = ShapedType::isDynamic(shape[d]) ||
                           ShapedType::isDynamic(type.getShape()[d])
                       ? ShapedType::kDynamic
                       : shape[d] + type.getShape()[d];
      } else if (!compatible(shape[d], type.getShape()[d])) {
        return emitOpError() << "inputs differ in dimension " << d << ": "
                             << first << " and " << type;
      }
    }
  }
  return checkResultShape(*this, shape);
}

LogicalResult GatherOp::verify() {
  RankedTensorType data = tensorType(getData()), indices = tensorType(getIndices());
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), data.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(*axis + 1));
  return checkResultShape(*this, shape);
}

//===----------------------------------------------------------------------===//
// Element types: what the folders rely on
//===----------------------------------------------------------------------===//

static Type elementOf(Value value) { return tensorType(value).getElementType(); }

static LogicalResult expectElement(Operation *op, StringRef what, Type actual,
                                   Type expected) {
  if (actual != expected)
    return op->emitOpError() << what << " has element type " << actual
                             << " but must have " << expected;
  return success();
}

/// Arithmetic: the result and both operands share one element type (Pow's
/// exponent may differ). Comparisons: equal operand types, an i1 result.
template <typename BinaryOp>
static LogicalResult verifyBinary(BinaryOp op, bool compares, bool logical,
                                  bool anyExponent = false) {
  Builder b(op.getContext());
  Type lhs = elementOf(op.getA()), rhs = elementOf(op.getB());
  if (!anyExponent && lhs != rhs)
    return op.emitOpError() << "operand element types differ: " << lhs
                            << " and " << rhs;
  if (logical && failed(expectElement(op, "A", lhs, b.getI1Type())))
    return failure();
  return expectElement(op, "the result", op.getType().getElementType(),
                       compares || logical ? b.getI1Type() : lhs);
}

LogicalResult AddOp::verify() { return verifyBinary(*this, false, false); }
LogicalResult SubOp::verify() { return verifyBinary(*this, false, false); }
LogicalResult MulOp::verify() { return verifyBinary(*this, false, false); }
LogicalResult DivOp::verify() { return verifyBinary(*this, false, false); }
LogicalResult ModOp::verify() {
  if (failed(verifyBinary(*this, false, false)))
    return failure();
  if (!getFmod() && !elementOf(getA()).isInteger())
    return emitOpError("fmod = 0 (the divisor's sign) is for integers; "
                       "floating-point Mod needs fmod = 1");
  return success();
}
LogicalResult PowOp::verify() { return verifyBinary(*this, false, false, true); }
LogicalResult EqualOp::verify() { return verifyBinary(*this, true, false); }
LogicalResult LessOp::verify() { return verifyBinary(*this, true, false); }
LogicalResult LessOrEqualOp::verify() { return verifyBinary(*this, true, false); }
LogicalResult GreaterOp::verify() { return verifyBinary(*this, true, false); }
LogicalResult GreaterOrEqualOp::verify() {
  return verifyBinary(*this, true, false);
}
LogicalResult AndOp::verify() { return verifyBinary(*this, false, true); }
LogicalResult OrOp::verify() { return verifyBinary(*this, false, true); }
LogicalResult XorOp::verify() { return verifyBinary(*this, false, true); }

LogicalResult CeluOp::verify() {
  if (getAlpha().isZero())
    return emitOpError("alpha must not be 0 (Celu divides by it)");
  return success();
}

LogicalResult ShrinkOp::verify() {
  if (getLambd().isNegative())
    return emitOpError() << "lambd must not be negative, not "
                         << getLambd().convertToDouble();
  return success();
}

/// The slope broadcasts to X one way: its dimensions, aligned to X's last
/// ones, are 1 or X's.
LogicalResult PReluOp::verify() {
  RankedTensorType x = tensorType(getX()), slope = tensorType(getSlope());
  if (failed(expectElement(*this, "slope", slope.getElementType(),
                           x.getElementType())))
    return failure();
  int64_t offset = x.getRank() - slope.getRank();
  bool broadcasts = offset >= 0;
  for (int64_t d = 0; broadcasts && d < slope.getRank(); ++d)
    broadcasts = slope.getDimSize(d) == 1 ||
                 compatible(slope.getDimSize(d), x.getDimSize(d + offset));
  if (!broadcasts)
    return emitOpError() << "slope " << slope << " does not broadcast to X "
                         << x;
  return success();
}

FailureOr<SmallVector<int64_t>>
mlir::onnxir::windowPads(StringRef autoPad, ArrayRef<int64_t> given,
                         ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                         ArrayRef<int64_t> input, ArrayRef<int64_t> kernel,
                         std::string &why) {
  size_t n = kernel.size();
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER") {
    why = "auto_pad \"" + autoPad.str() +
          "\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER";
    return failure();
  }
  SmallVector<int64_t> pads(given);
  if (autoPad != "NOTSET")
    pads.assign(2 * n, 0);
  if (strides.size() != n || pads.size() != 2 * n || dilations.size() != n ||
      input.size() != n + 2) {
    why = "strides, pads or dilations do not match the kernel rank";
    return failure();
  }
  if (autoPad.starts_with("SAME"))
    for (size_t d = 0; d < n; ++d) {
      int64_t size = input[d + 2], stride = strides[d];
      int64_t out = (size + stride - 1) / stride;
      int64_t total = std::max<int64_t>(
          0, (out - 1) * stride + (kernel[d] - 1) * dilations[d] + 1 - size);
      int64_t small = total / 2;
      pads[d] = autoPad == "SAME_UPPER" ? small : total - small;
      pads[d + n] = total - pads[d];
    }
  return pads;
}

FailureOr<EinsumTerms> mlir::onnxir::einsumTerms(StringRef equation,
                                                 ArrayRef<int64_t> ranks) {
  std::string text;
  for (char c : equation)
    if (c != ' ')
      text.push_back(c);
  auto [lhs, rhs] = StringRef(text).split("->");
  SmallVector<StringRef> parts;
  lhs.split(parts, ',');
  bool ellipsis = StringRef(text).contains("...");
  if (ellipsis && ranks.size() != parts.size())
    return failure();
  // How many dims each input's ellipsis stands for; the most name them all.
  SmallVector<int64_t> spans(parts.size(), 0);
  int64_t most = 0;
  for (auto [i, part] : llvm::enumerate(parts)) {
    if (!part.contains("..."))
      continue;
    spans[i] = ranks[i] - static_cast<int64_t>(part.size() - 3);
    if (spans[i] < 0 || part.count("...") != 1)
      return failure();
    most = std::max(most, spans[i]);
  }
  std::string spare;
  for (char c = 'A'; c <= 'z' && static_cast<int64_t>(spare.size()) < most; ++c)
    if (llvm::isAlpha(c) && !StringRef(text).contains(c))
      spare.push_back(c);
  if (static_cast<int64_t>(spare.size()) < most)
    return failure();
  auto expand = [&](StringRef term, int64_t span) {
    auto [before, after] = term.split("...");
    return term.contains("...")
               ? (before + StringRef(spare).take_back(span) + after).str()
               : term.str();
  };
  EinsumTerms terms;
  std::map<char, int> uses;
  for (auto [part, span] : llvm::zip(parts, spans)) {
    terms.inputs.push_back(expand(part, span));
    for (char c : part)
      if (c != '.')
        ++uses[c];
  }
  if (StringRef(text).contains("->")) {
    terms.output = expand(rhs, most);
    return terms;
  }
  terms.output = spare;
  for (auto [c, count] : uses)
    if (count == 1)
      terms.output.push_back(c);
  return terms;
}

/// Python's `a // b`, as ONNX's pads from output_shape use it.
static int64_t floorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

FailureOr<SmallVector<int64_t>>
mlir::onnxir::convolutionPads(ConvTransposeOp op, std::string &why) {
  int64_t n = op.getSpatialRank();
  ArrayRef<int64_t> in = tensorType(op.getX()).getShape().drop_front(2);
  ArrayRef<int64_t> out = op.getType().getShape().drop_front(2);
  ArrayRef<int64_t> kernel = tensorType(op.getW()).getShape().drop_front(2);
  SmallVector<int64_t> strides = op.getStridesOrDefault(),
                       dilations = op.getDilationsOrDefault(),
                       pads = op.getPadsOrDefault(),
                       extraRows = valuesOrDefault(op.getOutputPadding(), n, 0);
  std::optional<ArrayRef<int64_t>> shape = op.getOutputShape();
  StringRef autoPad = op.getAutoPad();
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    why = "auto_pad \"" + autoPad.str() +
          "\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER";
  else if (static_cast<int64_t>(in.size()) != n ||
           static_cast<int64_t>(kernel.size()) != n ||
           static_cast<int64_t>(strides.size()) != n ||
           static_cast<int64_t>(dilations.size()) != n ||
           static_cast<int64_t>(pads.size()) != 2 * n ||
           static_cast<int64_t>(extraRows.size()) != n ||
           (shape && static_cast<int64_t>(shape->size()) < n))
    why = "strides, pads, dilations, output_padding or output_shape do not "
          "match the kernel rank";
  for (int64_t d = 0; why.empty() && d < n; ++d) {
    int64_t natural =
        strides[d] * (in[d] - 1) + (kernel[d] - 1) * dilations[d] + 1;
    if (shape) {
      int64_t total = natural + extraRows[d] - (*shape)[shape->size() - n + d];
      pads[d] = total - floorDiv(total, 2);
    } else if (autoPad == "VALID") {
      pads[d] = 0;
    } else if (autoPad != "NOTSET") {
      // SAME_*: the output is the result type's; the odd row of the crop
      // goes to the end (UPPER) or the beginning (LOWER).
      int64_t total = std::max<int64_t>(0, natural + extraRows[d] - out[d]);
      pads[d] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
    int64_t extra = out[d] - (natural - pads[d]); // rows past the last window
    if (pads[d] < 0 || extra >= strides[d])
      why = "output dimension " + std::to_string(d) + " (" +
            std::to_string(out[d]) +
            ") cannot come from the input's with begin pad " +
            std::to_string(pads[d]);
    pads[d + n] = std::max<int64_t>(0, -extra);
  }
  if (!why.empty())
    return failure();
  return pads;
}

/// The shapes of a recurrent op's inputs and outputs (the ONNX dialect's
/// ODS comment on ONNX_RecurrentOp).
template <typename RecurrentOp>
static LogicalResult verifyRecurrent(RecurrentOp op, Value initialC) {
  StringRef direction = op.getDirection();
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return op.emitOpError("direction must be forward, reverse or "
                          "bidirectional, not \"")
           << direction << "\"";
  if (op.getLayout() != 0 && op.getLayout() != 1)
    return op.emitOpError("layout must be 0 or 1, not ") << op.getLayout();
  RankedTensorType x = tensorType(op.getX());
  if (x.getRank() != 3)
    return op.emitOpError("X must have rank 3, not ") << x.getRank();
  bool batchFirst = op.getLayout() == 1;
  int64_t seq = x.getDimSize(batchFirst ? 1 : 0),
          batch = x.getDimSize(batchFirst ? 0 : 1), input = x.getDimSize(2);
  int64_t dirs = op.getDirectionCount(), hidden = op.getHiddenSize(),
          gates = op.getGateCount() * hidden;
  auto expect = [&](Value value, StringRef what,
                    ArrayRef<int64_t> shape) -> LogicalResult {
    if (!value || isa<NoneType>(value.getType()))
      return success();
    RankedTensorType type = tensorType(value);
    if (type.getShape() == shape)
      return success();
    std::string expected;
    llvm::raw_string_ostream os(expected);
    llvm::interleave(shape, os, "x");
    return op.emitOpError()
           << what << " has type " << type << "; expected shape " << expected;
  };
  SmallVector<int64_t> state = batchFirst
                                   ? SmallVector<int64_t>{batch, dirs, hidden}
                                   : SmallVector<int64_t>{dirs, batch, hidden};
  SmallVector<int64_t> y = batchFirst
                               ? SmallVector<int64_t>{batch, seq, dirs, hidden}
                               : SmallVector<int64_t>{seq, dirs, batch, hidden};
  if (failed(expect(op.getW(), "W", {dirs, gates, input})) ||
      failed(expect(op.getR(), "R", {dirs, gates, hidden})) ||
      failed(expect(op.getB(), "B", {dirs, 2 * gates})) ||
      failed(expect(op.getSequenceLens(), "sequence_lens", {batch})) ||
      failed(expect(op.getInitialH(), "initial_h", state)) ||
      failed(expect(initialC, "initial_c", state)) ||
      failed(expect(op->getResult(0), "Y", y)))
    return failure();
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    if (failed(expect(op->getResult(i), i == 1 ? "Y_h" : "Y_c", state)))
      return failure();
  return success();
}

LogicalResult LSTMOp::verify() {
  if (failed(verifyRecurrent(*this, getInitialC())))
    return failure();
  int64_t peepholes = 3 * static_cast<int64_t>(getHiddenSize());
  if (!isa<NoneType>(getP().getType()) &&
      tensorType(getP()).getShape() !=
          ArrayRef<int64_t>{getDirectionCount(), peepholes})
    return emitOpError("P has type ")
           << getP().getType() << "; expected [dirs, 3 * hidden_size]";
  return success();
}
LogicalResult GRUOp::verify() { return verifyRecurrent(*this, Value()); }
LogicalResult RNNOp::verify() { return verifyRecurrent(*this, Value()); }

template <typename RecurrentOp>
static std::string recurrentUnsupportedIn(RecurrentOp op,
                                          ArrayRef<StringRef> defaults) {
  if (std::optional<ArrayAttr> activations = op.getActivations()) {
    bool same = activations->size() == defaults.size() * op.getDirectionCount();
    for (unsigned i = 0; same && i < activations->size(); ++i)
      same = cast<StringAttr>((*activations)[i])
                 .getValue()
                 .equals_insensitive(defaults[i % defaults.size()]);
    if (!same)
      return "attribute 'activations' is not supported: only the default "
             "activations (" +
             llvm::join(defaults, ", ") + ") run";
  }
  if (op.getActivationAlpha() || op.getActivationBeta())
    return "attributes 'activation_alpha' and 'activation_beta' are not "
           "supported";
  if (op.getClip())
    return "attribute 'clip' is not supported";
  Value lens = op.getSequenceLens();
  if (!isa<NoneType>(lens.getType())) {
    DenseIntElementsAttr values;
    int64_t seq = tensorType(op.getX()).getDimSize(op.getLayout() == 1 ? 1 : 0);
    if (!matchPattern(lens, m_Constant(&values)) ||
        llvm::any_of(values.getValues<APInt>(),
                     [&](const APInt &v) { return v.getSExtValue() != seq; }))
      return "input 'sequence_lens' is supported only as a constant equal to "
             "the sequence length (" +
             std::to_string(seq) + ") for every batch entry";
  }
  return "";
}

std::string mlir::onnxir::recurrentUnsupported(Operation *op) {
  if (auto lstm = dyn_cast<LSTMOp>(op)) {
    if (lstm.getInputForget() != 0)
      return "attribute 'input_forget' is not supported";
    if (!isa<NoneType>(lstm.getP().getType()))
      return "input 'P' (peepholes) is not supported";
    return recurrentUnsupportedIn(lstm, {"Sigmoid", "Tanh", "Tanh"});
  }
  if (auto gru = dyn_cast<GRUOp>(op))
    return recurrentUnsupportedIn(gru, {"Sigmoid", "Tanh"});
  return recurrentUnsupportedIn(cast<RNNOp>(op), {"Tanh"});
}

template <typename RecurrentOp>
static SmallVector<Type> recurrentResultTypesOf(RecurrentOp op) {
  RankedTensorType x = tensorType(op.getX());
  bool batchFirst = op.getLayout() == 1;
  int64_t seq = x.getDimSize(batchFirst ? 1 : 0),
          batch = x.getDimSize(batchFirst ? 0 : 1),
          dirs = op.getDirectionCount(), hidden = op.getHiddenSize();
  Type element = x.getElementType();
  SmallVector<int64_t> y = batchFirst
                               ? SmallVector<int64_t>{batch, seq, dirs, hidden}
                               : SmallVector<int64_t>{seq, dirs, batch, hidden};
  SmallVector<int64_t> state = batchFirst
                                   ? SmallVector<int64_t>{batch, dirs, hidden}
                                   : SmallVector<int64_t>{dirs, batch, hidden};
  SmallVector<Type> types = {RankedTensorType::get(y, element)};
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    types.push_back(RankedTensorType::get(state, element));
  return types;
}

SmallVector<Type> mlir::onnxir::recurrentResultTypes(Operation *op) {
  if (auto lstm = dyn_cast<LSTMOp>(op))
    return recurrentResultTypesOf(lstm);
  if (auto gru = dyn_cast<GRUOp>(op))
    return recurrentResultTypesOf(gru);
  return recurrentResultTypesOf(cast<RNNOp>(op));
}

LogicalResult ResizeOp::verify() {
  StringRef mode = getMode(), nearest = getNearestMode(),
            transform = getCoordinateTransformationMode();
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return emitOpError() << "mode must be nearest, linear or cubic, not '"
                         << mode << "'";
  if (!llvm::is_contained(
          {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
          nearest))
    return emitOpError()
           << "nearest_mode '" << nearest << "' is not one of "
           << "round_prefer_floor, round_prefer_ceil, floor, ceil";
  if (!llvm::is_contained({"half_pixel", "pytorch_half_pixel", "align_corners",
                           "asymmetric", "tf_half_pixel_for_nn",
                           "tf_crop_and_resize"},
                          transform))
    return emitOpError() << "coordinate_transformation_mode '" << transform
                         << "' is not an ONNX one";
  if (getType().getRank() != tensorType(getX()).getRank())
    return emitOpError() << "result rank " << getType().getRank()
                         << " differs from X's "
                         << tensorType(getX()).getRank();
  return expectElement(*this, "the result", getType().getElementType(),
                       elementOf(getX()));
}

LogicalResult GridSampleOp::verify() {
  StringRef mode = getMode(), padding = getPaddingMode();
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return emitOpError() << "mode must be bilinear, nearest or bicubic "
                            "(opset 16's names), not '"
                         << mode << "'";
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return emitOpError() << "padding_mode must be zeros, border or "
                            "reflection, not '"
                         << padding << "'";
  if (getAlignCorners() != 0 && getAlignCorners() != 1)
    return emitOpError() << "align_corners must be 0 or 1, not "
                         << getAlignCorners();
  RankedTensorType x = tensorType(getX()), grid = tensorType(getGrid());
  if (x.getRank() != 4)
    return emitOpError() << "X must be 4-D [N, C, H, W] (opset 16 defines "
                            "GridSample on 4-D inputs only), not "
                         << x;
  if (grid.getRank() != 4 || !compatible(grid.getDimSize(3), 2) ||
      !compatible(grid.getDimSize(0), x.getDimSize(0)))
    return emitOpError() << "grid must be [N, Ho, Wo, 2] with X's N, not "
                         << grid;
  if (!isa<FloatType>(grid.getElementType()))
    return emitOpError() << "grid must hold floats, not "
                         << grid.getElementType();
  if (failed(checkResultShape(*this, {x.getDimSize(0), x.getDimSize(1),
                                      grid.getDimSize(1), grid.getDimSize(2)})))
    return failure();
  return expectElement(*this, "the result", getType().getElementType(),
                       x.getElementType());
}

std::optional<SmallVector<double>> ResizeOp::getConstantScales() {
  RankedTensorType x = tensorType(getX());
  DenseFPElementsAttr scales;
  if (!isa<NoneType>(getScales().getType()) &&
      matchPattern(getScales(), m_Constant(&scales)) && !scales.empty()) {
    if (scales.getNumElements() != x.getRank())
      return std::nullopt;
    return llvm::to_vector(
        llvm::map_range(scales.getValues<APFloat>(),
                        [](const APFloat &v) { return v.convertToDouble(); }));
  }
  if (isa<NoneType>(getSizes().getType()) || !x.hasStaticShape())
    return std::nullopt;
  // Scales given at run time (non-empty) cannot be read here.
  auto scalesType = dyn_cast<RankedTensorType>(getScales().getType());
  if (!isa<NoneType>(getScales().getType()) && !scales &&
      (!scalesType || !scalesType.hasStaticShape() ||
       scalesType.getNumElements() != 0))
    return std::nullopt;
  SmallVector<int64_t> sizes;
  DenseIntElementsAttr constantSizes;
  if (matchPattern(getSizes(), m_Constant(&constantSizes))) {
    for (const APInt &size : constantSizes.getValues<APInt>())
      sizes.push_back(size.getSExtValue());
  } else if (auto sizesType = dyn_cast<RankedTensorType>(getSizes().getType());
             sizesType && sizesType.hasStaticShape() &&
             sizesType.getNumElements() == x.getRank() &&
             getType().hasStaticShape()) {
    // Sizes given at run time: the static result shape is the contract they
    // keep, and with sizes ONNX's scales are exactly sizes / X's dimensions.
    llvm::append_range(sizes, getType().getShape());
  }
  if (static_cast<int64_t>(sizes.size()) != x.getRank())
    return std::nullopt;
  SmallVector<double> result;
  for (auto [size, dim] : llvm::zip(sizes, x.getShape())) {
    if (dim == 0)
      return std::nullopt;
    result.push_back(static_cast<double>(size) / dim);
  }
  return result;
}

LogicalResult PadOp::verify() {
  StringRef mode = getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return emitOpError() << "mode must be constant, reflect or edge, not '"
                         << mode << "'";
  RankedTensorType data = tensorType(getData()), pads = tensorType(getPads());
  if (failed(expectElement(*this, "pads", pads.getElementType(),
                           Builder(getContext()).getI64Type())) ||
      failed(expectElement(*this, "the result", getType().getElementType(),
                           data.getElementType())))
    return failure();
  if (pads.getRank() != 1 ||
      !compatible(pads.getDimSize(0), 2 * data.getRank()))
    return emitOpError() << "pads must be a 1-D tensor of "
                         << 2 * data.getRank()
                         << " values (a begin and an end per axis), not "
                         << pads;
  if (!isa<NoneType>(getConstantValue().getType()) &&
      failed(expectElement(*this, "constant_value",
                           elementOf(getConstantValue()),
                           data.getElementType())))
    return failure();
  if (getType().getRank() != data.getRank())
    return emitOpError() << "result rank " << getType().getRank()
                         << " differs from the data's " << data.getRank();
  return success();
}

LogicalResult WhereOp::verify() {
  Builder b(getContext());
  if (failed(expectElement(*this, "the condition", elementOf(getCondition()),
                           b.getI1Type())) ||
      failed(expectElement(*this, "X", elementOf(getX()),
                           getType().getElementType())))
    return failure();
  return expectElement(*this, "Y", elementOf(getY()), getType().getElementType());
}

LogicalResult ShapeOp::verify() {
  return expectElement(*this, "the result", getType().getElementType(),
                       Builder(getContext()).getI64Type());
}

LogicalResult SizeOp::verify() {
  return expectElement(*this, "the result", getType().getElementType(),
                       Builder(getContext()).getI64Type());
}

/// Ops that only reshape: same element type and element count.
static LogicalResult verifySameElements(Operation *op, Value input) {
  RankedTensorType in = tensorType(input);
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  if (failed(expectElement(op, "the result", out.getElementType(),
                           in.getElementType())))
    return failure();
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return op->emitOpError() << "turns " << in.getNumElements()
                             << " elements into " << out.getNumElements();
  return success();
}

LogicalResult SqueezeOp::verify() { return verifySameElements(*this, getData()); }
LogicalResult UnsqueezeOp::verify() {
  return verifySameElements(*this, getData());
}

LogicalResult ConstantOfShapeOp::verify() {
  Type expected = Builder(getContext()).getF32Type();
  if (std::optional<ElementsAttr> value = getValue()) {
    if (value->getNumElements() != 1)
      return emitOpError() << "value must hold one element";
    expected = value->getElementType();
  }
  return expectElement(*this, "the result", getType().getElementType(),
                       expected);
}

LogicalResult RangeOp::verify() {
  Type element = getType().getElementType();
  if (failed(expectElement(*this, "start", elementOf(getStart()), element)) ||
      failed(expectElement(*this, "limit", elementOf(getLimit()), element)))
    return failure();
  return expectElement(*this, "delta", elementOf(getDelta()), element);
}

Value mlir::onnxir::buildTupleRows(OpBuilder &b, Location loc, Value indices,
                                   ArrayRef<int64_t> sizes) {
  auto indexType = cast<RankedTensorType>(indices.getType());
  int64_t k = static_cast<int64_t>(sizes.size());
  auto rowsType =
      RankedTensorType::get(indexType.getShape().drop_back(), b.getI64Type());
  SmallVector<int64_t> strides(k, 1);
  for (int64_t d = k - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * sizes[d + 1];
  auto constant = indices.getDefiningOp<ConstantOp>();
  auto known =
      constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue()) : nullptr;
  if (known) {
    SmallVector<int64_t> values, rows;
    for (const APInt &v : known.getValues<APInt>())
      values.push_back(v.getSExtValue());
    for (size_t t = 0; t < values.size(); t += k) {
      int64_t row = 0;
      for (int64_t d = 0; d < k; ++d)
        row += (values[t + d] % sizes[d] + sizes[d]) % sizes[d] * strides[d];
      rows.push_back(row);
    }
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(rowsType, ArrayRef<int64_t>(rows)));
  }
  auto scalar = [&](int64_t v) -> Value {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                    b.getI64IntegerAttr(v)));
  };
  if (!indexType.getElementType().isInteger(64))
    indices = b.create<CastOp>(
        loc, indexType.clone(b.getI64Type()), indices,
        b.getI64IntegerAttr(7 /* ONNX's TensorProto::INT64 */));
  // Longer axes are wrapped by Mod, unchecked, rather than by a constant
  // of their size.
  constexpr int64_t kMaxCheckedSize = 1 << 20;
  Value rows;
  for (int64_t d = 0; d < k; ++d) {
    Value at = b.create<GatherOp>(loc, rowsType, indices, scalar(d),
                                  b.getI64IntegerAttr(indexType.getRank() - 1));
    if (sizes[d] <= kMaxCheckedSize) {
      // iota[at] is `at` wrapped into [0, size), and the Gather kernel
      // checks that it is in [-size, size).
      auto iotaType = RankedTensorType::get({sizes[d]}, b.getI64Type());
      SmallVector<int64_t> iota =
          llvm::to_vector(llvm::seq<int64_t>(0, sizes[d]));
      at = b.create<GatherOp>(
          loc, rowsType,
          b.create<ConstantOp>(
              loc, DenseElementsAttr::get(iotaType, ArrayRef<int64_t>(iota))),
          at, b.getI64IntegerAttr(0));
    } else {
      at = b.create<ModOp>(loc, rowsType, at, scalar(sizes[d]),
                           b.getI64IntegerAttr(0));
    }
    if (strides[d] != 1)
      at = b.create<MulOp>(loc, rowsType, at, scalar(strides[d]));
    rows = d ? b.create<AddOp>(loc, rowsType, rows, at).getResult() : at;
  }
  return rows;
}

bool mlir::onnxir::drawsRandom(Operation *op) {
  return isa<DropoutOp, BernoulliOp, RandomNormalOp, RandomNormalLikeOp,
             RandomUniformOp, RandomUniformLikeOp>(op);
}
