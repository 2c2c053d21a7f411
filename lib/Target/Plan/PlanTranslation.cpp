//===- PlanTranslation.cpp - MLIR to the runtime plan ---------------------===//
//
/// Writes a lowered, memory-planned module as a FlatBuffers plan. Three
/// arenas: activations (sized and placed by fsdp-plan-memory), weights
/// (every fsdp.param and fsdp.buffer, in declaration order, each at the
/// layout library's tensor alignment, filled by the weight map) and constants
/// (the graph's constants that kernels read, their bytes embedded in the plan).
/// Views are buffers that share their source's bytes. A sharded program's flat
/// units are stored once each (members and layout); the weights arena holds the
/// rank's shard of each. Collectives run on the communication stream; each
/// kernel lists the kernels of the other stream it must wait for, derived
/// from the bytes they share.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Target/Plan/PlanTranslation.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/InitAll.h"
#include "fsdp/Target/Plan/RuntimeDType.h"
#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"
#include "src/kernel_check.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <limits>

using namespace mlir;
using mlir::fsdp::FSDPDialect;
namespace plan = fsdprt::plan;

namespace {

constexpr uint32_t kActivations = 0, kWeights = 1, kConstants = 2;
constexpr int64_t kAlignment = ::fsdp::layout::kTensorAlignmentBytes;

int64_t alignTo(int64_t value) {
  return ::fsdp::layout::alignTo(value, kAlignment);
}

/// plan.fbs's DType holds fsdprt_dtype_t's values (runtime/src/dtype.cpp
/// checks that they agree).
FailureOr<plan::DType> dtypeOf(Type type) {
  std::optional<fsdprt_dtype_t> dtype = mlir::fsdp::runtimeDType(type);
  if (!dtype)
    return failure();
  return static_cast<plan::DType>(*dtype);
}

/// A kernel location's label: the ONNX node name the importer recorded.
std::string labelOf(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string label;
    for (Location part : fused.getLocations()) {
      std::string inner = labelOf(part);
      if (!inner.empty())
        label += (label.empty() ? "" : "+") + inner;
    }
    return label;
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return labelOf(call.getCallee());
  return "";
}

/// The bytes of a constant, one byte per boolean, splats expanded.
FailureOr<std::vector<uint8_t>> encodeConstant(onnxir::ConstantOp constant) {
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense)
    return constant.emitOpError("has a value the plan writer cannot encode");
  auto type = cast<RankedTensorType>(dense.getType());
  Type element = type.getElementType();
  int64_t count = type.getNumElements();
  std::vector<uint8_t> bytes;
  if (element.isSignlessInteger(1)) {
    bytes.reserve(count);
    for (bool value : dense.getValues<bool>())
      bytes.push_back(value ? 1 : 0);
    return bytes;
  }
  ArrayRef<char> raw = dense.getRawData();
  int64_t size = mlir::fsdp::elementBytes(element);
  if (dense.isSplat()) {
    bytes.reserve(count * size);
    for (int64_t i = 0; i < count; ++i)
      bytes.insert(bytes.end(), raw.begin(), raw.begin() + size);
  } else {
    bytes.assign(raw.begin(), raw.end());
  }
  return bytes;
}

class PlanWriter {
public:
  PlanWriter(ModuleOp module) : module(module) {}

  LogicalResult write(llvm::raw_ostream &os);

private:
  /// Adds a buffer; returns its id.
  FailureOr<uint32_t> addBuffer(Operation *anchor, uint32_t arena,
                                int64_t offset, Type type);
  /// Result `index` of `func` is the new value of `of`, in buffer `source`.
  LogicalResult addUpdate(func::FuncOp func, unsigned index,
                          FlatSymbolRefAttr of, Value value, uint32_t source);
  /// The buffer holding `value`, created for constants and views on demand.
  FailureOr<uint32_t> bufferOf(Value value, Operation *user);
  LogicalResult declareState();
  LogicalResult declareUnit(mlir::fsdp::FlatParamOp unit);
  flatbuffers::Offset<
      flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
  aliasesOf(mlir::fsdp::ParamOp param);
  LogicalResult writeKernel(mlir::fsdp::KernelOp kernel);
  LogicalResult writeCollective(Operation *op);
  /// Records kernel `index`'s stream and the bytes it reads and writes.
  void trackKernel(uint32_t stream, ArrayRef<uint32_t> inputs,
                   ArrayRef<uint32_t> outputs);
  /// Per kernel, the latest kernel of the other stream it conflicts with.
  std::vector<std::vector<uint32_t>> dependencies() const;
  /// Refuses a plan whose kernels the runtime's CPU backend would refuse
  /// at session creation, naming each kernel's node.
  LogicalResult checkKernels();
  LogicalResult addKernel(Operation *op, StringRef name,
                          ArrayRef<uint32_t> inputs, ArrayRef<uint32_t> outputs,
                          std::vector<flatbuffers::Offset<plan::Attr>> attrs,
                          uint32_t stream);
  FailureOr<flatbuffers::Offset<plan::Attr>> attrOf(mlir::fsdp::KernelOp kernel,
                                                    NamedAttribute attr);

  ModuleOp module;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<plan::Buffer>> buffers;
  /// Kernels are finished once their dependencies are known.
  struct PendingKernel {
    flatbuffers::Offset<flatbuffers::String> op, location;
    flatbuffers::Offset<flatbuffers::Vector<uint32_t>> inputs, outputs;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<plan::Attr>>>
        attrs;
    uint32_t stream;
  };
  /// Bytes of one arena.
  struct Span {
    uint32_t arena;
    int64_t begin, end;
    bool overlaps(const Span &other) const {
      return arena == other.arena && begin < other.end && other.begin < end;
    }
  };
  struct Access {
    uint32_t stream;
    SmallVector<Span> reads, writes;
  };
  std::vector<PendingKernel> kernels;
  /// The op each kernel comes from, for errors.
  std::vector<Operation *> kernelOps;
  std::vector<Access> accesses;
  std::vector<int64_t> bufferBytes;
  std::vector<flatbuffers::Offset<plan::Unit>> units;
  SymbolTableCollection symbols;
  std::vector<flatbuffers::Offset<plan::WeightRef>> weights;
  std::vector<flatbuffers::Offset<plan::ConstantData>> constants;
  std::vector<plan::StateUpdate> updates;
  llvm::StringSet<> updated;
  /// (arena, offset) of each buffer, for views.
  std::vector<std::pair<uint32_t, int64_t>> placement;
  DenseMap<Value, uint32_t> valueBuffers;
  llvm::StringMap<uint32_t> stateBuffers;
  std::string modelDir;
  int64_t weightBytes = 0, constantBytes = 0;
};

FailureOr<uint32_t> PlanWriter::addBuffer(Operation *anchor, uint32_t arena,
                                          int64_t offset, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  FailureOr<plan::DType> dtype = failure();
  if (tensor)
    dtype = dtypeOf(tensor.getElementType());
  if (!tensor || !tensor.hasStaticShape() || failed(dtype))
    return anchor->emitOpError()
           << "has a value of type " << type
           << " that a plan cannot hold (static shapes of plan dtypes only)";
  // Offsets and arena sizes are sums of these: each buffer must end
  // (aligned) within int64, or the plan would describe a wrapped, small arena.
  std::optional<int64_t> bytes = mlir::fsdp::checkedByteSize(tensor);
  std::optional<int64_t> end =
      bytes && offset >= 0 ? llvm::checkedAdd(offset, *bytes) : std::nullopt;
  if (!end || *end > std::numeric_limits<int64_t>::max() - kAlignment)
    return anchor->emitOpError()
           << "has a value of type " << type << (bytes ? " at offset " : "")
           << (bytes ? std::to_string(offset) : std::string())
           << " whose bytes overflow int64";
  auto shape = fbb.CreateVector(tensor.getShape().data(), tensor.getRank());
  buffers.push_back(
      plan::CreateBuffer(fbb, arena, offset, *bytes, *dtype, shape));
  placement.emplace_back(arena, offset);
  bufferBytes.push_back(*bytes);
  return static_cast<uint32_t>(buffers.size() - 1);
}

/// A parameter's other FQNs (tied weights), for state dicts.
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
PlanWriter::aliasesOf(mlir::fsdp::ParamOp param) {
  std::optional<ArrayAttr> aliases = param.getAliases();
  if (!aliases || aliases->empty())
    return 0;
  std::vector<flatbuffers::Offset<flatbuffers::String>> names;
  for (Attribute alias : *aliases)
    names.push_back(fbb.CreateString(cast<StringAttr>(alias).str()));
  return fbb.CreateVector(names);
}

/// A unit's shard in the weights arena, and the unit's layout: its members'
/// shapes and bytes on disk, stored once for every rank.
LogicalResult PlanWriter::declareUnit(mlir::fsdp::FlatParamOp unit) {
  FailureOr<int64_t> ranks = mlir::fsdp::resolveWorldSize(unit, symbols);
  FailureOr<SmallVector<mlir::fsdp::ParamOp>> members =
      mlir::fsdp::resolveParams(unit, symbols);
  if (failed(ranks) || failed(members))
    return failure();
  RankedTensorType flat = unit.getTensorType();
  auto shardType = RankedTensorType::get({flat.getNumElements() / *ranks},
                                         flat.getElementType());
  FailureOr<uint32_t> shard = addBuffer(unit, kWeights, weightBytes, shardType);
  FailureOr<plan::DType> dtype = dtypeOf(flat.getElementType());
  if (failed(shard) || failed(dtype))
    return failure();
  std::vector<flatbuffers::Offset<plan::UnitParam>> params;
  for (mlir::fsdp::ParamOp param : *members) {
    std::optional<mlir::fsdp::DataRefAttr> data = param.getData();
    if (!data)
      return unit.emitOpError()
             << "member '" << param.getSymName()
             << "' has no data reference; the plan cannot load its "
                "initial value";
    auto type = cast<RankedTensorType>(param.getType());
    std::optional<int64_t> bytes = mlir::fsdp::checkedByteSize(type);
    if (!bytes || data->getLength() != *bytes)
      return param.emitOpError()
             << "'" << param.getSymName() << "' refers to " << data->getLength()
             << " bytes but its type " << type << " holds "
             << (bytes ? std::to_string(*bytes) : "more than int64 can count");
    params.push_back(plan::CreateUnitParam(
        fbb, fbb.CreateString(param.getSymName().str()),
        fbb.CreateVector(type.getShape().data(), type.getRank()),
        fbb.CreateString(data->getFile().str()), data->getOffset(),
        data->getLength(), aliasesOf(param)));
  }
  ArrayRef<int16_t> axes = unit.getMeshAxes();
  units.push_back(
      plan::CreateUnit(fbb, fbb.CreateString(unit.getSymName().str()),
                       fbb.CreateString(unit.getModule().value_or("").str()),
                       fbb.CreateVector(params), unit.getAlignment(),
                       fbb.CreateVector(axes.data(), axes.size()), *dtype,
                       flat.getNumElements(), *shard));
  stateBuffers[unit.getSymName()] = *shard;
  weightBytes = alignTo(weightBytes + bufferBytes[*shard]);
  return success();
}

LogicalResult PlanWriter::declareState() {
  llvm::DenseSet<Operation *> flattened;
  for (auto unit : module.getOps<mlir::fsdp::FlatParamOp>()) {
    if (failed(declareUnit(unit)))
      return failure();
    FailureOr<SmallVector<mlir::fsdp::ParamOp>> members =
        mlir::fsdp::resolveParams(unit, symbols);
    for (mlir::fsdp::ParamOp param : *members)
      flattened.insert(param);
  }
  for (Operation &op : module.getBody()->getOperations()) {
    auto param = dyn_cast<mlir::fsdp::ParamOp>(op);
    auto buffer = dyn_cast<mlir::fsdp::BufferOp>(op);
    if ((!param && !buffer) || flattened.contains(&op))
      continue;
    StringRef name = param ? param.getSymName() : buffer.getSymName();
    Type type = param ? param.getType() : buffer.getType();
    std::optional<mlir::fsdp::DataRefAttr> data =
        param ? param.getData() : buffer.getData();
    FailureOr<uint32_t> id = addBuffer(&op, kWeights, weightBytes, type);
    if (failed(id))
      return failure();
    // addBuffer checked the size.
    int64_t bytes = bufferBytes[*id];
    if (!data && param)
      return op.emitOpError() << "'" << name
                              << "' has no data reference; the plan cannot "
                                 "load its initial value";
    if (!data) { // state that starts as zeros
      auto of = op.getAttrOfType<FlatSymbolRefAttr>(
          FSDPDialect::StateOfAttrHelper::getNameStr());
      weights.push_back(plan::CreateWeightRef(
          fbb, fbb.CreateString(name.str()), plan::StateKind::Buffer,
          fbb.CreateString(""), 0, bytes, *id,
          of ? fbb.CreateString(of.getValue().str()) : 0));
      stateBuffers[name] = *id;
      weightBytes = alignTo(weightBytes + bytes);
      continue;
    }
    if (data->getLength() != bytes)
      return op.emitOpError()
             << "'" << name << "' refers to " << data->getLength()
             << " bytes but its type " << type << " holds " << bytes;
    weights.push_back(plan::CreateWeightRef(
        fbb, fbb.CreateString(name.str()),
        param ? plan::StateKind::Param : plan::StateKind::Buffer,
        fbb.CreateString(data->getFile().str()), data->getOffset(),
        data->getLength(), *id, 0, param ? aliasesOf(param) : 0));
    stateBuffers[name] = *id;
    weightBytes = alignTo(weightBytes + bytes);
  }
  return success();
}

LogicalResult PlanWriter::addUpdate(func::FuncOp func, unsigned index,
                                    FlatSymbolRefAttr of, Value value,
                                    uint32_t source) {
  auto fail = [&]() {
    return func.emitError("mlir-to-plan: result ")
           << index << " updates " << of << ": ";
  };
  Operation *state = module.lookupSymbol(of);
  if (!isa_and_nonnull<mlir::fsdp::ParamOp, mlir::fsdp::BufferOp,
                       mlir::fsdp::FlatParamOp>(state))
    return fail() << "no fsdp.param, fsdp.buffer or fsdp.flat_param has "
                     "that name";
  if (!stateBuffers.count(of.getValue()))
    return fail() << "it is a member of a flat unit; update the unit's shard";
  // The plan holds a unit's shard: the update is the shard's new value.
  Type type = value.getType();
  if (auto param = dyn_cast<mlir::fsdp::ParamOp>(state))
    type = param.getType();
  else if (auto buffer = dyn_cast<mlir::fsdp::BufferOp>(state))
    type = buffer.getType();
  else if (auto tensor = dyn_cast<RankedTensorType>(type);
           !tensor || mlir::fsdp::checkedByteSize(tensor) !=
                          bufferBytes[stateBuffers.lookup(of.getValue())])
    return fail() << "the result is " << value.getType()
                  << ", which is not the size of the rank's shard";
  if (type != value.getType())
    return fail() << "the result is " << value.getType() << " but the state is "
                  << type;
  if (!updated.insert(of.getValue()).second)
    return fail() << "another result updates it too";
  if (placement[source].first != kActivations)
    return fail() << "the new value is not computed by the step";
  updates.emplace_back(source, stateBuffers.lookup(of.getValue()));
  return success();
}

FailureOr<uint32_t> PlanWriter::bufferOf(Value value, Operation *user) {
  auto it = valueBuffers.find(value);
  if (it != valueBuffers.end())
    return it->second;
  Operation *def = value.getDefiningOp();
  FailureOr<uint32_t> id = failure();
  if (auto get = dyn_cast_or_null<mlir::fsdp::GetParamOp>(def)) {
    if (!stateBuffers.count(get.getParam()))
      return get.emitOpError()
             << "reads '" << get.getParam()
             << "', a member of a flat unit; run --fsdp-flatten's reads "
                "through --fsdp-shard";
    id = stateBuffers.lookup(get.getParam());
  } else if (auto get = dyn_cast_or_null<mlir::fsdp::GetShardOp>(def)) {
    id = stateBuffers.lookup(get.getUnit());
  } else if (auto get = dyn_cast_or_null<mlir::fsdp::GetFlatParamOp>(def)) {
    // Without fsdp-shard the full buffer is the shard only on one rank.
    auto unit = module.lookupSymbol<mlir::fsdp::FlatParamOp>(get.getUnit());
    if (!unit || unit.getMesh())
      return get.emitOpError()
             << "reads the full flat buffer of @" << get.getUnit()
             << ", which is sharded; run --fsdp-shard first";
    id = stateBuffers.lookup(get.getUnit());
  } else if (auto get = dyn_cast_or_null<mlir::fsdp::GetBufferOp>(def)) {
    id = stateBuffers.lookup(get.getBuffer());
  } else if (auto constant = dyn_cast_or_null<onnxir::ConstantOp>(def)) {
    FailureOr<std::vector<uint8_t>> bytes = encodeConstant(constant);
    if (failed(bytes))
      return failure();
    id = addBuffer(def, kConstants, constantBytes, value.getType());
    if (failed(id))
      return failure();
    constants.push_back(plan::CreateConstantData(
        fbb, *id, fbb.CreateVector(bytes->data(), bytes->size())));
    constantBytes = alignTo(constantBytes + bytes->size());
  } else if (auto wait = dyn_cast_or_null<mlir::fsdp::WaitOp>(def)) {
    id = bufferOf(wait.getFuture(), def); // the collective's bytes
  } else if (auto view = dyn_cast_or_null<mlir::fsdp::ViewOp>(def)) {
    FailureOr<uint32_t> source = bufferOf(view.getInput(), def);
    if (failed(source))
      return failure();
    auto [arena, offset] = placement[*source];
    auto sourceType = cast<RankedTensorType>(view.getInput().getType());
    offset += static_cast<int64_t>(view.getOffset()) *
              mlir::fsdp::elementBytes(sourceType.getElementType());
    id = addBuffer(def, arena, offset, value.getType());
  } else {
    return user->emitOpError()
           << "reads a value the plan writer cannot place (produced by "
           << (def ? def->getName().getStringRef() : StringRef("an argument"))
           << "); run --fsdp-lower-to-runtime and --fsdp-plan-memory first";
  }
  if (succeeded(id))
    valueBuffers[value] = *id;
  return id;
}

FailureOr<flatbuffers::Offset<plan::Attr>>
PlanWriter::attrOf(mlir::fsdp::KernelOp kernel, NamedAttribute attr) {
  auto name = fbb.CreateString(attr.getName().str());
  Attribute value = attr.getValue();
  if (auto i = dyn_cast<IntegerAttr>(value))
    return plan::CreateAttr(fbb, name, plan::AttrValue::IntAttr,
                            plan::CreateIntAttr(fbb, i.getInt()).Union());
  if (auto f = dyn_cast<FloatAttr>(value))
    return plan::CreateAttr(
        fbb, name, plan::AttrValue::FloatAttr,
        plan::CreateFloatAttr(fbb, f.getValueAsDouble()).Union());
  if (auto s = dyn_cast<StringAttr>(value))
    return plan::CreateAttr(
        fbb, name, plan::AttrValue::StringAttr,
        plan::CreateStringAttr(fbb, fbb.CreateString(s.str())).Union());
  if (auto ints = dyn_cast<DenseI64ArrayAttr>(value)) {
    auto values = fbb.CreateVector(ints.asArrayRef().data(), ints.size());
    return plan::CreateAttr(fbb, name, plan::AttrValue::IntsAttr,
                            plan::CreateIntsAttr(fbb, values).Union());
  }
  if (auto floats = dyn_cast<DenseF64ArrayAttr>(value)) {
    auto values = fbb.CreateVector(floats.asArrayRef().data(), floats.size());
    return plan::CreateAttr(fbb, name, plan::AttrValue::FloatsAttr,
                            plan::CreateFloatsAttr(fbb, values).Union());
  }
  return kernel.emitOpError() << "parameter '" << attr.getName()
                              << "' has a kind the plan cannot hold: " << value;
}

LogicalResult PlanWriter::writeKernel(mlir::fsdp::KernelOp kernel) {
  std::vector<uint32_t> inputs, outputs;
  for (Value input : kernel.getInputs()) {
    FailureOr<uint32_t> id = bufferOf(input, kernel);
    if (failed(id))
      return failure();
    inputs.push_back(*id);
  }
  auto offsets = kernel->getAttrOfType<DenseI64ArrayAttr>("fsdp.offsets");
  if (!offsets ||
      offsets.size() != static_cast<int64_t>(kernel.getNumResults()))
    return kernel.emitOpError(
        "has no activation offsets; run --fsdp-plan-memory first");
  auto inPlace =
      kernel->getAttrOfType<DenseI64ArrayAttr>(mlir::fsdp::kInPlaceAttrName);
  if (inPlace && inPlace.size() != offsets.size())
    return kernel.emitOpError("has an in-place mark per result");
  for (auto [result, offset] :
       llvm::zip(kernel.getResults(), offsets.asArrayRef())) {
    int64_t into = inPlace ? inPlace[result.getResultNumber()] : -1;
    if (into >= static_cast<int64_t>(inputs.size()) ||
        (into >= 0 && kernel.getInputs()[into].getType() != result.getType()))
      return kernel.emitOpError("result ")
             << result.getResultNumber() << " cannot be written over input "
             << into;
    // fsdp-plan-memory found the input's old value dead from here: the
    // kernel writes the new one over it.
    FailureOr<uint32_t> id =
        into >= 0 ? FailureOr<uint32_t>(inputs[into])
                  : addBuffer(kernel, kActivations, offset, result.getType());
    if (failed(id))
      return failure();
    valueBuffers[result] = *id;
    outputs.push_back(*id);
  }
  std::vector<flatbuffers::Offset<plan::Attr>> attrs;
  if (DictionaryAttr params = kernel.getParamsAttr())
    for (NamedAttribute param : params) {
      auto attr = attrOf(kernel, param);
      if (failed(attr))
        return failure();
      attrs.push_back(*attr);
    }
  return addKernel(kernel, kernel.getKernel(), inputs, outputs,
                   std::move(attrs), /*stream=*/0);
}

LogicalResult
PlanWriter::addKernel(Operation *op, StringRef name, ArrayRef<uint32_t> inputs,
                      ArrayRef<uint32_t> outputs,
                      std::vector<flatbuffers::Offset<plan::Attr>> attrs,
                      uint32_t stream) {
  trackKernel(stream, inputs, outputs);
  kernelOps.push_back(op);
  kernels.push_back({fbb.CreateString(name.str()),
                     fbb.CreateString(labelOf(op->getLoc())),
                     fbb.CreateVector(inputs.data(), inputs.size()),
                     fbb.CreateVector(outputs.data(), outputs.size()),
                     fbb.CreateVector(attrs), stream});
  return success();
}

LogicalResult PlanWriter::checkKernels() {
  std::vector<fsdprt::KernelRefusal> refusals =
      fsdprt::checkKernelsOnCpu(*plan::GetPlan(fbb.GetBufferPointer()));
  for (const fsdprt::KernelRefusal &refusal : refusals) {
    Location loc = kernelOps[refusal.kernel]->getLoc();
    emitError(loc) << "mlir-to-plan: node '" << labelOf(loc)
                   << "': the runtime's CPU backend refuses "
                   << refusal.message;
  }
  return success(refusals.empty());
}

/// A collective is a kernel of the communication stream named after it,
/// with its group (`mesh_axes`) and reduction as attributes.
LogicalResult PlanWriter::writeCollective(Operation *op) {
  FailureOr<uint32_t> input = bufferOf(op->getOperand(0), op);
  if (failed(input))
    return failure();
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("fsdp.offsets");
  if (!offsets || offsets.size() != 1)
    return op->emitOpError(
        "has no activation offset; run --fsdp-plan-memory first");
  Value result = op->getResult(0);
  FailureOr<uint32_t> output = addBuffer(
      op, kActivations, offsets[0], mlir::fsdp::collectiveValueType(result));
  if (failed(output))
    return failure();
  valueBuffers[result] = *output;
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
  std::vector<int64_t> wide(axes.asArrayRef().begin(), axes.asArrayRef().end());
  std::vector<flatbuffers::Offset<plan::Attr>> attrs = {plan::CreateAttr(
      fbb, fbb.CreateString("mesh_axes"), plan::AttrValue::IntsAttr,
      plan::CreateIntsAttr(fbb, fbb.CreateVector(wide)).Union())};
  if (auto reduction = op->getAttrOfType<StringAttr>("reduction"))
    attrs.push_back(plan::CreateAttr(
        fbb, fbb.CreateString("reduction"), plan::AttrValue::StringAttr,
        plan::CreateStringAttr(fbb, fbb.CreateString(reduction.str()))
            .Union()));
  StringRef name = op->getName().stripDialect();
  return addKernel(op, name, {*input}, {*output}, std::move(attrs),
                   /*stream=*/1);
}

void PlanWriter::trackKernel(uint32_t stream, ArrayRef<uint32_t> inputs,
                             ArrayRef<uint32_t> outputs) {
  Access access{stream, {}, {}};
  auto span = [&](uint32_t id) {
    auto [arena, offset] = placement[id];
    return Span{arena, offset, offset + bufferBytes[id]};
  };
  for (uint32_t id : inputs)
    access.reads.push_back(span(id));
  for (uint32_t id : outputs)
    access.writes.push_back(span(id));
  accesses.push_back(std::move(access));
}

/// Kernel k waits for the latest kernel j < k of the other stream that
/// writes bytes k reads or writes, or reads bytes k writes (the memory plan
/// reuses bytes across streams, so write-after-read counts too). Waiting
/// for j covers everything before j on its stream. Collectives are few, so
/// compute kernels check only them and collectives scan back until the
/// first conflict.
std::vector<std::vector<uint32_t>> PlanWriter::dependencies() const {
  auto conflicts = [](const Access &a, const Access &b) {
    for (const Span &w : a.writes) {
      for (const Span &r : b.reads)
        if (w.overlaps(r))
          return true;
      for (const Span &x : b.writes)
        if (w.overlaps(x))
          return true;
    }
    for (const Span &r : a.reads)
      for (const Span &w : b.writes)
        if (r.overlaps(w))
          return true;
    return false;
  };
  std::vector<std::vector<uint32_t>> deps(accesses.size());
  std::vector<uint32_t> collectives;
  // Per stream, the latest kernel of the other stream it already waited
  // for: an earlier wait covers a later kernel's need (streams are in order).
  int64_t waited[2] = {-1, -1};
  for (uint32_t k = 0; k < accesses.size(); ++k) {
    const Access &access = accesses[k];
    int64_t found = -1;
    if (access.stream == 0) {
      for (uint32_t j : llvm::reverse(collectives)) {
        if (static_cast<int64_t>(j) <= waited[0])
          break;
        if (conflicts(accesses[j], access)) {
          found = j;
          break;
        }
      }
    } else {
      for (int64_t j = static_cast<int64_t>(k) - 1; j > waited[1]; --j)
        if (accesses[j].stream != access.stream &&
            conflicts(accesses[j], access)) {
          found = j;
          break;
        }
      collectives.push_back(k);
    }
    if (found >= 0) {
      deps[k].push_back(found);
      waited[access.stream] = found;
    }
  }
  return deps;
}

LogicalResult PlanWriter::write(llvm::raw_ostream &os) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  func::FuncOp func = module.lookupSymbol<func::FuncOp>("forward");
  if (!func && funcs.size() == 1)
    func = funcs.front();
  if (!func)
    return module.emitError(
        "mlir-to-plan: the module has no @forward function");
  auto activationBytes =
      func->getAttrOfType<IntegerAttr>("fsdp.activation_bytes");
  if (!activationBytes)
    return func.emitError("mlir-to-plan: @")
           << func.getSymName()
           << " has no memory plan; run --fsdp-plan-memory first";

  // Weight files are resolved against the directory of the imported model.
  if (auto source = module->getAttrOfType<StringAttr>("fsdp.source")) {
    SmallString<256> dir(source.getValue());
    llvm::sys::fs::make_absolute(dir);
    llvm::sys::path::remove_filename(dir);
    modelDir = dir.str().str();
  }
  if (failed(declareState()))
    return failure();

  std::vector<flatbuffers::Offset<plan::TensorDesc>> inputs, outputs;
  auto describe = [&](StringRef name, Value value, uint32_t buffer) {
    auto type = cast<RankedTensorType>(value.getType());
    return plan::CreateTensorDesc(
        fbb, fbb.CreateString(name.str()), *dtypeOf(type.getElementType()),
        fbb.CreateVector(type.getShape().data(), type.getRank()), buffer);
  };
  for (BlockArgument arg : func.getArguments()) {
    auto offset =
        func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "fsdp.offset");
    if (!offset)
      return func.emitError("mlir-to-plan: input ")
             << arg.getArgNumber() << " has no offset; run --fsdp-plan-memory";
    FailureOr<uint32_t> id =
        addBuffer(func, kActivations, offset.getInt(), arg.getType());
    if (failed(id))
      return failure();
    valueBuffers[arg] = *id;
    auto name = func.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), FSDPDialect::NameAttrHelper::getNameStr());
    inputs.push_back(describe(
        name ? name.getValue() : ("input" + Twine(arg.getArgNumber())).str(),
        arg, *id));
  }

  for (Operation &op : func.getBody().front()) {
    if (auto kernel = dyn_cast<mlir::fsdp::KernelOp>(op)) {
      if (failed(writeKernel(kernel)))
        return failure();
    } else if (isa<mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
                   mlir::fsdp::AllReduceOp>(op)) {
      if (failed(writeCollective(&op)))
        return failure();
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        FailureOr<uint32_t> id = bufferOf(value, ret);
        if (failed(id))
          return failure();
        if (auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
                index, FSDPDialect::UpdateOfAttrHelper::getNameStr())) {
          // Written in place by its kernel: nothing to copy after the run.
          auto state = stateBuffers.find(of.getValue());
          if (state != stateBuffers.end() && state->second == *id &&
              updated.insert(of.getValue()).second)
            continue;
          if (failed(addUpdate(func, index, of, value, *id)))
            return failure();
          continue;
        }
        auto name = func.getResultAttrOfType<StringAttr>(
            index, FSDPDialect::NameAttrHelper::getNameStr());
        outputs.push_back(
            describe(name ? name.getValue() : ("output" + Twine(index)).str(),
                     value, *id));
      }
    } else if (!isa<mlir::fsdp::ViewOp, mlir::fsdp::GetParamOp,
                    mlir::fsdp::GetBufferOp, mlir::fsdp::GetShardOp,
                    mlir::fsdp::GetFlatParamOp, mlir::fsdp::ReleaseOp,
                    mlir::fsdp::WaitOp, onnxir::ConstantOp, onnxir::NoValueOp>(
                   op)) {
      return op.emitOpError("has no runtime kernel; run "
                            "--fsdp-lower-to-runtime before --mlir-to-plan");
    }
  }

  auto arena = [&](const char *name, int64_t bytes, plan::ArenaKind kind) {
    return plan::CreateArena(fbb, fbb.CreateString(name), bytes, kAlignment,
                             kind);
  };
  std::vector<flatbuffers::Offset<plan::Arena>> arenas = {
      arena("activations", activationBytes.getInt(),
            plan::ArenaKind::Activations),
      arena("weights", weightBytes, plan::ArenaKind::Weights),
      arena("constants", constantBytes, plan::ArenaKind::Constants)};
  std::vector<std::vector<uint32_t>> deps = dependencies();
  std::vector<flatbuffers::Offset<plan::Kernel>> finished;
  for (auto [kernel, waits] : llvm::zip(kernels, deps))
    finished.push_back(
        plan::CreateKernel(fbb, kernel.op, kernel.inputs, kernel.outputs,
                           kernel.attrs, kernel.location, kernel.stream,
                           waits.empty() ? 0 : fbb.CreateVector(waits)));

  // The mesh of a sharded program (none: one rank).
  std::vector<int64_t> meshShape;
  int64_t worldSize = 1;
  for (auto mesh : module.getOps<mlir::mesh::MeshOp>()) {
    if (!meshShape.empty())
      return mesh.emitOpError("mlir-to-plan: a plan has one mesh");
    meshShape.assign(mesh.getShape().begin(), mesh.getShape().end());
    for (int64_t size : meshShape) {
      if (size <= 0)
        return mesh.emitOpError("mlir-to-plan: the mesh must have static "
                                "sizes");
      worldSize *= size;
    }
  }
  uint64_t peak = activationBytes.getInt() + weightBytes + constantBytes;
  auto root = plan::CreatePlan(
      fbb, FSDPRT_PLAN_SCHEMA_VERSION, fbb.CreateString("fsdp-mlir"),
      fbb.CreateString(modelDir), worldSize, fbb.CreateVector(arenas),
      fbb.CreateVector(buffers), fbb.CreateVector(inputs),
      fbb.CreateVector(outputs), fbb.CreateVector(finished),
      fbb.CreateVector(weights), fbb.CreateVector(constants),
      fbb.CreateVectorOfStructs(updates), fbb.CreateVector(meshShape),
      fbb.CreateVector(units), peak);
  plan::FinishPlanBuffer(fbb, root);
  if (failed(checkKernels()))
    return failure();
  os.write(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
           fbb.GetSize());
  return success();
}

} // namespace

namespace fsdp {

llvm::LogicalResult translateToPlan(ModuleOp module, llvm::raw_ostream &os) {
  return PlanWriter(module).write(os);
}

void registerToPlanTranslation() {
  TranslateFromMLIRRegistration registration(
      "mlir-to-plan",
      "write a lowered, memory-planned module as a runtime plan (.plan)",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("mlir-to-plan: expected a builtin.module");
        return translateToPlan(module, os);
      },
      [](DialectRegistry &registry) { ::fsdp::registerAllDialects(registry); });
}

} // namespace fsdp
