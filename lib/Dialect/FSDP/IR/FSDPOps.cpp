//===- FSDPOps.cpp - fsdp dialect operations ------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"

namespace {

/// Prints `[@a, @b]` for a diagnostic.
std::string symbolList(ArrayRef<ParamOp> params) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(
      params, os, [&](ParamOp param) { os << "@" << param.getSymName(); });
  os << "]";
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

/// Checks that a param's or buffer's data reference holds exactly its bytes.
static LogicalResult verifyStorage(Operation *op, StringRef name,
                                   RankedTensorType type,
                                   std::optional<DataRefAttr> data) {
  if (!data)
    return success();
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return op->emitOpError() << "@" << name << ": element type " << element
                             << " has no defined byte size, so it cannot be "
                                "stored at a data reference";
  std::optional<int64_t> bytes = checkedByteSize(type);
  if (!bytes)
    return op->emitOpError() << "@" << name << ": " << type
                             << " is larger than the largest file offset";
  if (*bytes != data->getLength())
    return op->emitOpError()
           << "@" << name << ": data reference holds " << data->getLength()
           << " bytes but " << type << " needs " << *bytes;
  return success();
}

LogicalResult ParamOp::verify() {
  return verifyStorage(*this, getSymName(), getTensorType(), getData());
}

LogicalResult BufferOp::verify() {
  return verifyStorage(*this, getSymName(), getTensorType(), getData());
}

//===----------------------------------------------------------------------===//
// GetParamOp
//===----------------------------------------------------------------------===//

/// Checks that `ref` names a `StateOp` whose type is `type`.
template <typename StateOp>
static LogicalResult verifyStateRead(Operation *op, FlatSymbolRefAttr ref,
                                     Type type, StringRef kind,
                                     SymbolTableCollection &symbolTable) {
  auto state = symbolTable.lookupNearestSymbolFrom<StateOp>(op, ref);
  if (!state)
    return op->emitOpError() << ref << " does not name an " << kind;
  if (state.getTensorType() != type)
    return op->emitOpError() << "result type " << type << " differs from "
                             << ref << "'s type " << state.getType();
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyStateRead<ParamOp>(*this, getParamAttr(), getType(),
                                  "fsdp.param", symbolTable);
}

LogicalResult
GetBufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyStateRead<BufferOp>(*this, getBufferAttr(), getType(),
                                   "fsdp.buffer", symbolTable);
}

//===----------------------------------------------------------------------===//
// FlatParamOp
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<ParamOp>>
mlir::fsdp::resolveParams(FlatParamOp unit, SymbolTableCollection &symbols) {
  SmallVector<ParamOp> params;
  for (FlatSymbolRefAttr ref :
       unit.getParams().getAsRange<FlatSymbolRefAttr>()) {
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(unit, ref);
    if (!param)
      return unit.emitOpError()
             << "member " << ref << " does not name an fsdp.param";
    params.push_back(param);
  }
  return params;
}

FailureOr<int64_t>
mlir::fsdp::resolveGroupSize(Operation *op, FlatSymbolRefAttr meshRef,
                             ArrayRef<int16_t> axes,
                             SymbolTableCollection &symbols) {
  if (!meshRef) {
    if (!axes.empty())
      return op->emitOpError() << "names mesh axes but no mesh";
    return int64_t{1};
  }
  auto mesh = symbols.lookupNearestSymbolFrom<mesh::MeshOp>(op, meshRef);
  if (!mesh)
    return op->emitOpError() << meshRef << " does not name a mesh.mesh";
  if (axes.empty())
    return op->emitOpError() << "is sharded on @" << mesh.getSymName()
                             << " but names no mesh axis";
  ArrayRef<int64_t> shape = mesh.getShape();
  llvm::SmallDenseSet<int16_t> seen;
  int64_t size = 1;
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
      return op->emitOpError()
             << "mesh axis " << axis << " is outside @" << mesh.getSymName()
             << "'s " << shape.size() << " axes";
    if (!seen.insert(axis).second)
      return op->emitOpError() << "names mesh axis " << axis << " twice";
    if (ShapedType::isDynamic(shape[axis]))
      return op->emitOpError()
             << "mesh axis " << axis << " of @" << mesh.getSymName()
             << " has a dynamic size; flat layouts need a "
                "static world size";
    std::optional<int64_t> product = llvm::checkedMul(size, shape[axis]);
    if (!product)
      return op->emitOpError() << "world size overflows int64";
    size = *product;
  }
  return size;
}

FailureOr<int64_t>
mlir::fsdp::resolveWorldSize(FlatParamOp unit, SymbolTableCollection &symbols) {
  return resolveGroupSize(unit, unit.getMeshAttr(), unit.getMeshAxes(),
                          symbols);
}

FailureOr<::fsdp::layout::FlatLayout>
mlir::fsdp::computeLayout(FlatParamOp unit, SymbolTableCollection &symbols) {
  FailureOr<SmallVector<ParamOp>> params = resolveParams(unit, symbols);
  FailureOr<int64_t> worldSize = resolveWorldSize(unit, symbols);
  if (failed(params) || failed(worldSize))
    return failure();
  std::vector<int64_t> numels;
  numels.reserve(params->size());
  for (ParamOp param : *params) {
    std::optional<int64_t> numel = checkedNumElements(param.getTensorType());
    if (!numel)
      return unit.emitOpError()
             << "parameter @" << param.getSymName() << " " << param.getType()
             << " has more elements than int64 can count";
    numels.push_back(*numel);
  }
  std::string error;
  std::optional<::fsdp::layout::FlatLayout> layout =
      ::fsdp::layout::FlatLayout::create(numels, *worldSize,
                                         unit.getAlignment(), error);
  if (!layout)
    return unit.emitOpError() << "has no valid layout: " << error;
  return std::move(*layout);
}

LogicalResult
FlatParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<SmallVector<ParamOp>> params = resolveParams(*this, symbolTable);
  if (failed(params))
    return failure();

  llvm::SmallDenseSet<Operation *> seen;
  SmallVector<ParamOp> frozen, trainable;
  Type element = getTensorType().getElementType();
  for (ParamOp param : *params) {
    if (!seen.insert(param).second)
      return emitOpError() << "lists parameter @" << param.getSymName()
                           << " twice";
    Type paramElement = param.getTensorType().getElementType();
    if (paramElement != element)
      return emitOpError() << "parameter @" << param.getSymName()
                           << " has element type " << paramElement
                           << " but the flat buffer holds " << element;
    (param.requiresGrad() ? trainable : frozen).push_back(param);
  }
  if (!frozen.empty() && !trainable.empty())
    return emitOpError()
           << "mixes frozen and trainable parameters, which one flat buffer "
              "cannot hold: frozen "
           << symbolList(frozen) << ", trainable " << symbolList(trainable);

  if (!getTensorType().hasStaticShape())
    return emitOpError() << "type " << getType() << " must be static";
  FailureOr<::fsdp::layout::FlatLayout> layout =
      computeLayout(*this, symbolTable);
  if (failed(layout))
    return failure();
  if (getTensorType().getNumElements() != layout->paddedNumel())
    return emitOpError() << "type " << getType() << " has "
                         << getTensorType().getNumElements()
                         << " elements but the layout needs "
                         << layout->paddedNumel() << " ("
                         << layout->unpaddedNumel()
                         << " elements padded to a multiple of world size "
                         << layout->worldSize() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// GetFlatParamOp
//===----------------------------------------------------------------------===//

LogicalResult
GetFlatParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto unit =
      symbolTable.lookupNearestSymbolFrom<FlatParamOp>(*this, getUnitAttr());
  if (!unit)
    return emitOpError() << getUnitAttr()
                         << " does not name an fsdp.flat_param";
  if (unit.getTensorType() != getType())
    return emitOpError() << "result type " << getType() << " differs from "
                         << getUnitAttr() << "'s type " << unit.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Sharded programs: GetShardOp and the collectives
//===----------------------------------------------------------------------===//

LogicalResult GetShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto unit =
      symbolTable.lookupNearestSymbolFrom<FlatParamOp>(*this, getUnitAttr());
  if (!unit)
    return emitOpError() << getUnitAttr()
                         << " does not name an fsdp.flat_param";
  FailureOr<int64_t> world = resolveWorldSize(unit, symbolTable);
  if (failed(world))
    return failure();
  RankedTensorType flat = unit.getTensorType();
  if (getType().getElementType() != flat.getElementType() ||
      getType().getNumElements() * *world != flat.getNumElements())
    return emitOpError() << "result type " << getType() << " is not a 1/"
                         << *world << " shard of " << getUnitAttr()
                         << "'s type " << flat;
  return success();
}

Type mlir::fsdp::collectiveValueType(Value result) {
  if (auto future = dyn_cast<FutureType>(result.getType()))
    return future.getValueType();
  return result.getType();
}

LogicalResult WaitOp::verify() {
  auto future = cast<FutureType>(getFuture().getType());
  if (future.getValueType() != getType())
    return emitOpError() << "of " << future << " must produce "
                         << future.getValueType() << ", not " << getType();
  if (!isa_and_nonnull<AllGatherOp, ReduceScatterOp, AllReduceOp>(
          getFuture().getDefiningOp()))
    return emitOpError("waits for a value no collective started");
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer steps
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::verify() {
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  // Written as what must hold, so that NaN fails.
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
    return emitOpError() << "needs betas in [0, 1), not (" << beta1 << ", "
                         << beta2 << ")";
  double eps = getEps().convertToDouble();
  double decay = getWeightDecay().convertToDouble();
  if (!(eps >= 0 && decay >= 0 && std::isfinite(eps) && std::isfinite(decay)))
    return emitOpError("needs a finite non-negative eps and weight_decay");
  return success();
}

LogicalResult SGDOp::verify() {
  double momentum = getMomentum().convertToDouble();
  double decay = getWeightDecay().convertToDouble();
  if (!(momentum >= 0 && decay >= 0 && std::isfinite(momentum) &&
        std::isfinite(decay)))
    return emitOpError("needs a finite non-negative momentum and weight_decay");
  // The buffer and its new value exist exactly when momentum does.
  bool stateful = momentum != 0;
  if (static_cast<bool>(getMomentumBuffer()) != stateful ||
      static_cast<bool>(getNewMomentumBuffer()) != stateful)
    return emitOpError() << "with momentum " << momentum
                         << (stateful ? " needs" : " takes no")
                         << " momentum_buffer operand and result";
  if (stateful && (getMomentumBuffer().getType() != getParam().getType() ||
                   getNewMomentumBuffer().getType() != getParam().getType()))
    return emitOpError() << "momentum_buffer must be " << getParam().getType()
                         << " like the parameter";
  if (getNesterov() && !stateful)
    return emitOpError("nesterov needs momentum");
  return success();
}

/// Checks a collective's group and that `input`'s element count times
/// `inputTimes` equals `result`'s times `resultTimes` (group-size factors).
template <typename Op>
static LogicalResult verifyCollective(Op op, SymbolTableCollection &symbols,
                                      bool gathers, bool scatters) {
  FailureOr<int64_t> group =
      resolveGroupSize(op, op.getMeshAttr(), op.getMeshAxes(), symbols);
  if (failed(group))
    return failure();
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = dyn_cast<RankedTensorType>(collectiveValueType(op.getResult()));
  if (!out || (!gathers && !scatters ? false : out.getRank() != 1))
    return op.emitOpError()
           << "produces " << op.getResult().getType() << "; expected a "
           << (gathers || scatters ? "1-D " : "")
           << "tensor or a future of one";
  if (in.getElementType() != out.getElementType())
    return op.emitOpError()
           << "changes the element type from " << in.getElementType() << " to "
           << out.getElementType();
  // Overflow-checked: a huge type must not wrap into a match.
  std::optional<int64_t> inCount = checkedNumElements(in);
  std::optional<int64_t> outCount = checkedNumElements(out);
  if (inCount && gathers)
    inCount = llvm::checkedMul(*inCount, *group);
  if (outCount && scatters)
    outCount = llvm::checkedMul(*outCount, *group);
  if (!inCount || !outCount || *inCount != *outCount ||
      (!gathers && !scatters && in != out))
    return op.emitOpError() << "over a group of " << *group << " ranks cannot "
                            << "turn " << in << " into " << out;
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyCollective(*this, symbols, /*gathers=*/true, false);
}
LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyCollective(*this, symbols, false, /*scatters=*/true);
}
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyCollective(*this, symbols, false, false);
}

static LogicalResult verifyReduction(Operation *op, StringRef reduction) {
  if (reduction != "sum" && reduction != "avg")
    return op->emitOpError() << "reduction must be \"sum\" or \"avg\", not \""
                             << reduction << "\"";
  return success();
}
LogicalResult ReduceScatterOp::verify() {
  return verifyReduction(*this, getReduction());
}
LogicalResult AllReduceOp::verify() {
  return verifyReduction(*this, getReduction());
}

//===----------------------------------------------------------------------===//
// UnflattenOp
//===----------------------------------------------------------------------===//

/// Checks that `types` are the member types of the flat parameter `ref` and
/// `flatType` its type, for ops converting between the two (`kind` names the
/// side holding the members: "result" or "operand"). Under mixed precision
/// the flat buffer and its members may all be of another floating-point
/// type than the stored parameters (the unit's `param_dtype`).
static LogicalResult verifyMembers(Operation *op, FlatSymbolRefAttr ref,
                                   Type flatType, TypeRange types,
                                   StringRef kind,
                                   SymbolTableCollection &symbolTable) {
  auto unit = symbolTable.lookupNearestSymbolFrom<FlatParamOp>(op, ref);
  if (!unit)
    return op->emitOpError() << ref << " does not name an fsdp.flat_param";
  Type element = cast<RankedTensorType>(flatType).getElementType();
  Type stored = unit.getTensorType().getElementType();
  bool recast =
      element != stored && isa<FloatType>(element) && isa<FloatType>(stored);
  if (flatType != unit.getTensorType().clone(recast ? element : stored))
    return op->emitOpError() << "flat type " << flatType << " differs from "
                             << ref << "'s type " << unit.getType();
  FailureOr<SmallVector<ParamOp>> params = resolveParams(unit, symbolTable);
  if (failed(params))
    return failure();
  if (params->size() != types.size())
    return op->emitOpError()
           << "has " << types.size() << " " << kind << "s but " << ref
           << " holds " << params->size() << " parameters";
  for (auto [index, type, param] : llvm::enumerate(types, *params)) {
    Type expected = param.getTensorType().clone(element);
    if (type == expected)
      continue;
    InFlightDiagnostic diag = op->emitOpError()
                              << kind << " " << index << " has type " << type
                              << " but parameter @" << param.getSymName()
                              << " is " << param.getType();
    if (recast)
      diag << " (" << expected << " in the flat buffer's " << element << ")";
    return diag;
  }
  return success();
}

LogicalResult
UnflattenOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyMembers(*this, getUnitAttr(), getFlat().getType(),
                       getViews().getTypes(), "result", symbolTable);
}

LogicalResult PackOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyMembers(*this, getUnitAttr(), getFlat().getType(),
                       getValues().getTypes(), "operand", symbolTable);
}

//===----------------------------------------------------------------------===//
// Fused compute ops and runtime ops
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", not \""
                         << getApproximate() << "\"";
  return success();
}

/// Checks that `vector`, when present, is 1-D of `size` elements.
static LogicalResult verifyLastDimVector(Operation *op, Value vector,
                                         int64_t size, StringRef what) {
  if (!vector)
    return success();
  auto type = cast<RankedTensorType>(vector.getType());
  if (type.getRank() != 1 ||
      (!ShapedType::isDynamic(size) && type.getDimSize(0) != size &&
       !type.isDynamicDim(0)))
    return op->emitOpError() << what << " must be a vector of " << size
                             << " elements, not " << type;
  return success();
}

LogicalResult RMSNormOp::verify() {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (type.getRank() == 0)
    return emitOpError("input must have at least one dimension");
  if (getOutput().getType() != type)
    return emitOpError("result type must equal the input type");
  return verifyLastDimVector(*this, getScale(), type.getShape().back(),
                             "scale");
}

LogicalResult LinearOp::verify() {
  static constexpr StringLiteral kActivations[] = {
      "none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"};
  if (!llvm::is_contained(kActivations, getActivation()))
    return emitOpError() << "unknown activation \"" << getActivation()
                         << "\"; expected none, relu, gelu, gelu_tanh, silu, "
                            "tanh or sigmoid";
  auto input = cast<RankedTensorType>(getInput().getType());
  auto weight = cast<RankedTensorType>(getWeight().getType());
  auto output = cast<RankedTensorType>(getOutput().getType());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOpError("expects an input of rank >= 1 and a 2-D weight");
  int64_t k = weight.getDimSize(getTransposeWeight() ? 1 : 0);
  int64_t n = weight.getDimSize(getTransposeWeight() ? 0 : 1);
  if (input.getShape().back() != k)
    return emitOpError() << "input's last dimension " << input.getShape().back()
                         << " does not match the weight's reduction dimension "
                         << k;
  if (output.getRank() != input.getRank() || output.getShape().back() != n ||
      output.getShape().drop_back() != input.getShape().drop_back())
    return emitOpError() << "result type " << output << " does not match input "
                         << input << " and weight " << weight;
  return verifyLastDimVector(*this, getBias(), n, "bias");
}

/// The checks fsdp.attention and fsdp.attention_grad share: the mask kind
/// and operand, and shapes q [..., L, D], k_t [..., D, S], v [..., S, Dv].
static LogicalResult verifyAttentionInputs(Operation *op, StringRef kind,
                                           Value mask, RankedTensorType q,
                                           RankedTensorType kt,
                                           RankedTensorType v) {
  if (kind != "none" && kind != "add" && kind != "fill" && kind != "causal")
    return op->emitOpError()
           << "mask_kind must be none, add, fill or causal, not \"" << kind
           << "\"";
  bool needsMask = kind == "add" || kind == "fill";
  if (needsMask != bool(mask))
    return op->emitOpError() << "mask_kind \"" << kind << "\" "
                             << (mask ? "takes no mask" : "needs a mask");
  int64_t rank = q.getRank();
  if (rank < 2 || kt.getRank() != rank || v.getRank() != rank)
    return op->emitOpError("query, key_t and value must have one rank >= 2");
  if (q.getShape().drop_back(2) != kt.getShape().drop_back(2) ||
      q.getShape().drop_back(2) != v.getShape().drop_back(2))
    return op->emitOpError(
        "query, key_t and value must have equal batch dimensions");
  if (q.getDimSize(rank - 1) != kt.getDimSize(rank - 2) ||
      kt.getDimSize(rank - 1) != v.getDimSize(rank - 2))
    return op->emitOpError() << "shapes do not chain: query " << q << ", key_t "
                             << kt << ", value " << v;
  if (mask && kind == "fill" &&
      !cast<RankedTensorType>(mask.getType()).getElementType().isInteger(1))
    return op->emitOpError("a \"fill\" mask must be boolean (i1)");
  return success();
}

/// `t` with its dims reordered (dim k is t's dim perm[k]).
static RankedTensorType permutedType(RankedTensorType t,
                                     ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t from : perm)
    shape.push_back(t.getDimSize(from));
  return RankedTensorType::get(shape, t.getElementType());
}

/// The head-first types attention computes with ([..., L, D] query, output
/// and their gradients; [..., D, S] key_t, [..., S, Dv] value): the types
/// as they are in layout "bhsd"; in "bshd" ([B, rows, H, cols]) their
/// transposes, key_t's from [B, S, H, D].
static FailureOr<std::array<RankedTensorType, 4>>
headFirstTypes(Operation *op, StringRef layout, RankedTensorType q,
               RankedTensorType kt, RankedTensorType v, RankedTensorType y) {
  if (layout == "bhsd")
    return std::array<RankedTensorType, 4>{q, kt, v, y};
  if (layout != "bshd")
    return op->emitOpError()
           << "layout must be bhsd or bshd, not \"" << layout << "\"";
  for (RankedTensorType t : {q, kt, v, y})
    if (t.getRank() != 4)
      return op->emitOpError() << "layout \"bshd\" takes rank-4 "
                                  "[B, rows, H, cols] tensors, not "
                               << t;
  const int64_t toHeads[] = {0, 2, 1, 3}, toKeysT[] = {0, 2, 3, 1};
  return std::array<RankedTensorType, 4>{
      permutedType(q, toHeads), permutedType(kt, toKeysT),
      permutedType(v, toHeads), permutedType(y, toHeads)};
}

/// The type of lse for `q` [..., L, D]: [..., L] in f32.
static RankedTensorType lseTypeOf(RankedTensorType q) {
  return RankedTensorType::get(q.getShape().drop_back(),
                               Float32Type::get(q.getContext()));
}

/// x is [N, C, ...] and every per-channel tensor (`named`, in order) is
/// [C] (when C is static).
static LogicalResult verifyPerChannel(Operation *op, Value x,
                                      ArrayRef<Value> perChannel,
                                      ArrayRef<StringRef> named) {
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2)
    return op->emitOpError() << "x must be [N, C, ...], not " << xt;
  int64_t c = xt.getDimSize(1);
  for (auto [value, name] : llvm::zip(perChannel, named)) {
    auto t = cast<RankedTensorType>(value.getType());
    if (t.getRank() != 1 ||
        (c != ShapedType::kDynamic && t.getDimSize(0) != ShapedType::kDynamic &&
         t.getDimSize(0) != c))
      return op->emitOpError()
             << name << " must be [" << c << "] (x's channels), not " << t;
  }
  return success();
}

LogicalResult BatchNormTrainOp::verify() {
  if (getOutput().getType() != getX().getType())
    return emitOpError() << "output must be " << getX().getType() << ", not "
                         << getOutput().getType();
  return verifyPerChannel(
      *this, getX(),
      {getScale(), getBias(), getRunningMean(), getRunningVar(),
       getSavedMean(), getSavedInvstd(), getRunningMeanOut(),
       getRunningVarOut()},
      {"scale", "bias", "running_mean", "running_var", "saved_mean",
       "saved_invstd", "running_mean_out", "running_var_out"});
}

LogicalResult BatchNormGradOp::verify() {
  if (getGrad().getType() != getX().getType() ||
      getGradX().getType() != getX().getType())
    return emitOpError() << "grad and grad_x must be " << getX().getType()
                         << ", not " << getGrad().getType() << " and "
                         << getGradX().getType();
  if (getGradScale().getType() != getScale().getType() ||
      getGradBias().getType() != getScale().getType())
    return emitOpError() << "grad_scale and grad_bias must be "
                         << getScale().getType();
  return verifyPerChannel(*this, getX(),
                          {getScale(), getSavedMean(), getSavedInvstd()},
                          {"scale", "saved_mean", "saved_invstd"});
}

LogicalResult ActivationGradOp::verify() {
  if (getActivation() != "gelu" && getActivation() != "gelu_tanh" &&
      getActivation() != "silu")
    return emitOpError() << "activation must be \"gelu\", \"gelu_tanh\" or "
                            "\"silu\", not \""
                         << getActivation() << "\"";
  return success();
}

LogicalResult NormGradOp::verify() {
  if (getKind() != "layer" && getKind() != "rms")
    return emitOpError() << "kind must be \"layer\" or \"rms\", not \""
                         << getKind() << "\"";
  auto x = cast<RankedTensorType>(getX().getType());
  if (getGrad().getType() != x || getGradX().getType() != x)
    return emitOpError() << "grad and grad_x must be " << x << ", not "
                         << getGrad().getType() << " and "
                         << getGradX().getType();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= x.getRank())
    return emitOpError() << "axis " << axis << " is not a dim of " << x;
  auto normalised =
      RankedTensorType::get(x.getShape().drop_front(axis), x.getElementType());
  if (getScale() && getScale().getType() != normalised)
    return emitOpError() << "scale must be " << normalised
                         << " (the normalised dims), not "
                         << getScale().getType();
  if (getGradScale().getType() != normalised ||
      getGradBias().getType() != normalised)
    return emitOpError() << "grad_scale and grad_bias must be " << normalised;
  if (getKind() == "rms" && axis != x.getRank() - 1)
    return emitOpError() << "an RMS norm normalises the last dim only";
  return success();
}

/// Cross-entropy's per-position log-sum-exp: f32, of the labels' shape.
static LogicalResult verifyCrossEntropyLse(Operation *op, Value labels,
                                           Value lse) {
  auto expected =
      RankedTensorType::get(cast<RankedTensorType>(labels.getType()).getShape(),
                            Float32Type::get(op->getContext()));
  if (lse && lse.getType() != expected)
    return op->emitOpError()
           << "lse must be " << expected << " (f32, of the labels' shape), not "
           << lse.getType();
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  return verifyCrossEntropyLse(*this, getLabels(), getLse());
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  return verifyCrossEntropyLse(*this, getLabels(), getLse());
}

LogicalResult AttentionOp::verify() {
  FailureOr<std::array<RankedTensorType, 4>> types = headFirstTypes(
      *this, getLayout(), cast<RankedTensorType>(getQuery().getType()),
      cast<RankedTensorType>(getKeyT().getType()),
      cast<RankedTensorType>(getValue().getType()),
      cast<RankedTensorType>(getOutput().getType()));
  if (failed(types))
    return failure();
  auto [q, kt, v, out] = *types;
  if (failed(verifyAttentionInputs(*this, getMaskKind(), getMask(), q, kt, v)))
    return failure();
  int64_t rank = q.getRank();
  if (out.getRank() != rank ||
      out.getShape().drop_back() != q.getShape().drop_back() ||
      out.getDimSize(rank - 1) != v.getDimSize(rank - 1))
    return emitOpError() << "result type " << out << " should be query's with "
                         << "value's last dimension";
  if (getLse() && getLse().getType() != lseTypeOf(q))
    return emitOpError() << "lse must be " << lseTypeOf(q) << ", not "
                         << getLse().getType();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  auto output = cast<RankedTensorType>(getOutput().getType());
  FailureOr<std::array<RankedTensorType, 4>> types = headFirstTypes(
      *this, getLayout(), cast<RankedTensorType>(getQuery().getType()),
      cast<RankedTensorType>(getKeyT().getType()),
      cast<RankedTensorType>(getValue().getType()), output);
  if (failed(types))
    return failure();
  RankedTensorType q = (*types)[0], kt = (*types)[1], v = (*types)[2];
  if (failed(verifyAttentionInputs(*this, getMaskKind(), getMask(), q, kt, v)))
    return failure();
  SmallVector<int64_t> yShape(q.getShape().drop_back());
  yShape.push_back(v.getShape().back());
  // output and grad as stored: head-first, or [B, L, H, Dv] in bshd.
  auto yType = RankedTensorType::get(yShape, v.getElementType());
  if (getLayout() == "bshd")
    yType = RankedTensorType::get({yShape[0], yShape[2], yShape[1], yShape[3]},
                                  v.getElementType());
  if (q.getElementType() != kt.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOpError("query, key_t and value must have one element type");
  if (getOutput().getType() != yType || getGrad().getType() != yType)
    return emitOpError() << "output and grad must be " << yType << ", not "
                         << getOutput().getType() << " and "
                         << getGrad().getType();
  if (getLse().getType() != lseTypeOf(q))
    return emitOpError() << "lse must be " << lseTypeOf(q) << ", not "
                         << getLse().getType();
  if (getGradQuery().getType() != getQuery().getType() ||
      getGradKeyT().getType() != getKeyT().getType() ||
      getGradValue().getType() != getValue().getType())
    return emitOpError("results must have the types of query, key_t and value");
  return success();
}

Value ViewOp::getViewSource() { return getInput(); }

LogicalResult ViewOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  int64_t offset = getOffset();
  // Overflow-checked: a huge type must not wrap into a fit.
  std::optional<int64_t> inCount = checkedNumElements(in);
  std::optional<int64_t> outCount = checkedNumElements(out);
  if (offset == 0 && in.getElementType() == out.getElementType() && inCount &&
      inCount == outCount)
    return success();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "cannot view " << in << " as " << out
                         << ": element types must agree";
  std::optional<int64_t> end =
      inCount && outCount ? llvm::checkedAdd(offset, *outCount) : std::nullopt;
  if (offset < 0 || !end || *end > *inCount)
    return emitOpError() << "cannot view elements [" << offset << ", "
                         << (end ? std::to_string(*end) : "past int64")
                         << ") of " << in;
  return success();
}
