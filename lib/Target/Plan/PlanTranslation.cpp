//===- PlanTranslation.cpp - MLIR to the runtime plan ---------------------===//
//
/// Writes a lowered, memory-planned module as a FlatBuffers plan. Three
/// arenas: activations (sized and placed by fsdp-plan-memory), weights
/// (every fsdp.param and fsdp.buffer, in declaration order, 64-byte
/// aligned, filled by the weight map) and constants (the graph's constants
/// that kernels read, their bytes embedded in the plan). Views are buffers
/// that share their source's bytes.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Target/Plan/PlanTranslation.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/InitAll.h"
#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
namespace plan = fsdprt::plan;

namespace {

constexpr uint32_t kActivations = 0, kWeights = 1, kConstants = 2;
constexpr int64_t kAlignment = 64;

int64_t alignTo(int64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

FailureOr<plan::DType> dtypeOf(Type type) {
  if (type.isF32())
    return plan::DType::F32;
  if (type.isF16())
    return plan::DType::F16;
  if (type.isBF16())
    return plan::DType::BF16;
  if (type.isF64())
    return plan::DType::F64;
  if (type.isSignlessInteger(64))
    return plan::DType::I64;
  if (type.isSignlessInteger(32))
    return plan::DType::I32;
  if (type.isSignlessInteger(16))
    return plan::DType::I16;
  if (type.isSignlessInteger(8))
    return plan::DType::I8;
  if (type.isUnsignedInteger(8))
    return plan::DType::U8;
  if (type.isSignlessInteger(1))
    return plan::DType::Bool;
  return failure();
}

int64_t elementBytes(Type type) {
  return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
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
  int64_t size = elementBytes(element);
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
  LogicalResult writeKernel(mlir::fsdp::KernelOp kernel);
  FailureOr<flatbuffers::Offset<plan::Attr>> attrOf(mlir::fsdp::KernelOp kernel,
                                                    NamedAttribute attr);

  ModuleOp module;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<plan::Buffer>> buffers;
  std::vector<flatbuffers::Offset<plan::Kernel>> kernels;
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
  int64_t bytes =
      tensor.getNumElements() * elementBytes(tensor.getElementType());
  auto shape = fbb.CreateVector(tensor.getShape().data(), tensor.getRank());
  buffers.push_back(
      plan::CreateBuffer(fbb, arena, offset, bytes, *dtype, shape));
  placement.emplace_back(arena, offset);
  return static_cast<uint32_t>(buffers.size() - 1);
}

LogicalResult PlanWriter::declareState() {
  for (Operation &op : module.getBody()->getOperations()) {
    auto param = dyn_cast<mlir::fsdp::ParamOp>(op);
    auto buffer = dyn_cast<mlir::fsdp::BufferOp>(op);
    if (!param && !buffer)
      continue;
    StringRef name = param ? param.getSymName() : buffer.getSymName();
    Type type = param ? param.getType() : buffer.getType();
    std::optional<mlir::fsdp::DataRefAttr> data =
        param ? param.getData() : buffer.getData();
    FailureOr<uint32_t> id = addBuffer(&op, kWeights, weightBytes, type);
    if (failed(id))
      return failure();
    auto tensor = cast<RankedTensorType>(type);
    int64_t bytes =
        tensor.getNumElements() * elementBytes(tensor.getElementType());
    if (!data && param)
      return op.emitOpError() << "'" << name
                              << "' has no data reference; the plan cannot "
                                 "load its initial value";
    if (!data) { // state that starts as zeros
      weights.push_back(plan::CreateWeightRef(
          fbb, fbb.CreateString(name.str()), plan::StateKind::Buffer,
          fbb.CreateString(""), 0, bytes, *id));
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
        data->getLength(), *id));
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
  if (!isa_and_nonnull<mlir::fsdp::ParamOp, mlir::fsdp::BufferOp>(state))
    return fail() << "no fsdp.param or fsdp.buffer has that name";
  Type type = isa<mlir::fsdp::ParamOp>(state)
                  ? cast<mlir::fsdp::ParamOp>(state).getType()
                  : cast<mlir::fsdp::BufferOp>(state).getType();
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
    id = stateBuffers.lookup(get.getParam());
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
  } else if (auto view = dyn_cast_or_null<mlir::fsdp::ViewOp>(def)) {
    FailureOr<uint32_t> source = bufferOf(view.getInput(), def);
    if (failed(source))
      return failure();
    auto [arena, offset] = placement[*source];
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
  for (auto [result, offset] :
       llvm::zip(kernel.getResults(), offsets.asArrayRef())) {
    FailureOr<uint32_t> id =
        addBuffer(kernel, kActivations, offset, result.getType());
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
  kernels.push_back(plan::CreateKernel(
      fbb, fbb.CreateString(kernel.getKernel().str()), fbb.CreateVector(inputs),
      fbb.CreateVector(outputs), fbb.CreateVector(attrs),
      fbb.CreateString(labelOf(kernel.getLoc()))));
  return success();
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
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "fsdp.name");
    inputs.push_back(describe(
        name ? name.getValue() : ("input" + Twine(arg.getArgNumber())).str(),
        arg, *id));
  }

  for (Operation &op : func.getBody().front()) {
    if (auto kernel = dyn_cast<mlir::fsdp::KernelOp>(op)) {
      if (failed(writeKernel(kernel)))
        return failure();
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        FailureOr<uint32_t> id = bufferOf(value, ret);
        if (failed(id))
          return failure();
        if (auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
                index, "fsdp.update_of")) {
          if (failed(addUpdate(func, index, of, value, *id)))
            return failure();
          continue;
        }
        auto name = func.getResultAttrOfType<StringAttr>(index, "fsdp.name");
        outputs.push_back(
            describe(name ? name.getValue() : ("output" + Twine(index)).str(),
                     value, *id));
      }
    } else if (!isa<mlir::fsdp::ViewOp, mlir::fsdp::GetParamOp,
                    mlir::fsdp::GetBufferOp, onnxir::ConstantOp,
                    onnxir::NoValueOp>(op)) {
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
  auto root = plan::CreatePlan(
      fbb, FSDPRT_PLAN_SCHEMA_VERSION, fbb.CreateString("fsdp-mlir"),
      fbb.CreateString(modelDir), /*world_size=*/1, fbb.CreateVector(arenas),
      fbb.CreateVector(buffers), fbb.CreateVector(inputs),
      fbb.CreateVector(outputs), fbb.CreateVector(kernels),
      fbb.CreateVector(weights), fbb.CreateVector(constants),
      fbb.CreateVectorOfStructs(updates));
  plan::FinishPlanBuffer(fbb, root);
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
