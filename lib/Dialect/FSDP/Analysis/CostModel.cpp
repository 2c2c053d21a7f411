//===- CostModel.cpp - Modelled durations and the step's timeline ---------===//

#include "fsdp/Dialect/FSDP/Analysis/CostModel.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

int64_t numelOf(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t bytesOf(Type type) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValueType();
  return modelledBytes(type);
}

ArrayRef<int64_t> shapeOf(Value value) {
  auto tensor = dyn_cast<RankedTensorType>(value.getType());
  return tensor ? tensor.getShape() : ArrayRef<int64_t>();
}

/// The op's name for cost purposes: a runtime kernel's own name, or the
/// op's without its dialect ("MatMul", "linear", "attention").
StringRef kindOf(Operation *op) {
  if (auto kernel = dyn_cast<KernelOp>(op))
    return kernel.getKernel();
  return op->getName().stripDialect();
}

bool isFree(Operation *op) {
  return isa<ViewLikeOpInterface, GetParamOp, GetBufferOp, GetShardOp,
             GetFlatParamOp, ReleaseOp, WaitOp, UnflattenOp, onnxir::ConstantOp,
             onnxir::NoValueOp, func::ReturnOp>(op) ||
         isCollective(op);
}

} // namespace

bool mlir::fsdp::isCollective(Operation *op) {
  return isa<AllGatherOp, ReduceScatterOp, AllReduceOp>(op);
}

CostModel CostModel::of(ModuleOp module) {
  CostModel model;
  CostModelAttr recorded =
      FSDPDialect::CostModelAttrHelper(module.getContext()).getAttr(module);
  if (!recorded)
    return model;
  // A field left out keeps the default.
  auto get = [&](FloatAttr value, double &into) {
    if (value)
      into = value.getValueAsDouble();
  };
  get(recorded.getPeakFlops(), model.peakFlops);
  get(recorded.getMemoryBandwidth(), model.memoryBandwidth);
  get(recorded.getIntraBandwidth(), model.intraBandwidth);
  get(recorded.getIntraLatency(), model.intraLatency);
  get(recorded.getInterBandwidth(), model.interBandwidth);
  get(recorded.getInterLatency(), model.interLatency);
  if (IntegerAttr value = recorded.getRanksPerNode())
    model.ranksPerNode = value.getInt();
  if (BoolAttr value = recorded.getCpuRuntime())
    model.cpuRuntime = value.getValue();
  return model;
}

void CostModel::store(ModuleOp module) const {
  Builder b(module.getContext());
  FSDPDialect::CostModelAttrHelper(b.getContext())
      .setAttr(module,
               CostModelAttr::get(b.getContext(), b.getF64FloatAttr(peakFlops),
                                  b.getF64FloatAttr(memoryBandwidth),
                                  b.getF64FloatAttr(intraBandwidth),
                                  b.getF64FloatAttr(intraLatency),
                                  b.getF64FloatAttr(interBandwidth),
                                  b.getF64FloatAttr(interLatency),
                                  b.getI64IntegerAttr(ranksPerNode),
                                  b.getBoolAttr(cpuRuntime)));
}

double CostModel::flops(Operation *op) const {
  if (isFree(op) || op->getNumResults() == 0)
    return 0;
  StringRef kind = kindOf(op);
  double out = static_cast<double>(numelOf(op->getResult(0).getType()));
  if (kind == "MatMul" || kind == "matmul" || kind == "Gemm" ||
      kind == "gemm" || kind == "linear") {
    // 2 M N K: the contracted extent is the first operand's last dimension
    // (its second-to-last when it is transposed).
    ArrayRef<int64_t> a = shapeOf(op->getOperand(0));
    if (a.empty())
      return out;
    bool transA = false;
    for (StringRef name : {"transA", "trans_a"})
      if (auto attr = op->getAttrOfType<IntegerAttr>(name))
        transA |= attr.getInt() != 0;
    if (auto kernel = dyn_cast<KernelOp>(op))
      if (DictionaryAttr params = kernel.getParamsAttr())
        if (auto attr = params.getAs<IntegerAttr>("trans_a"))
          transA |= attr.getInt() != 0;
    int64_t k = transA && a.size() > 1 ? a[a.size() - 2] : a.back();
    return 2 * out * k;
  }
  if (kind.contains("conv") || kind.contains("Conv")) {
    // 2 per multiply-add: the larger activation times one filter's size.
    // The filter is operand 1 (Conv, the input gradient) or the result
    // (the weight gradient).
    Value filter =
        kind == "conv_grad_weight" ? op->getResult(0) : op->getOperand(1);
    ArrayRef<int64_t> w = shapeOf(filter);
    double perOutput =
        w.empty() || w[0] == 0
            ? 1
            : static_cast<double>(numelOf(filter.getType())) / w[0];
    double activation = 0;
    auto consider = [&](Value value) {
      if (value != filter)
        activation =
            std::max(activation, static_cast<double>(numelOf(value.getType())));
    };
    llvm::for_each(op->getOperands(), consider);
    llvm::for_each(op->getResults(), consider);
    return 2 * activation * perOutput;
  }
  if (kind == "attention" || kind == "attention_grad") {
    // q [.., L, D], k_t [.., D, S], v [.., S, Dv]. The forward: scores and
    // the weighted sum, 2 L S (D + Dv). The gradient recomputes the scores
    // (2 L S D) and makes dP (2 L S Dv), dq and dk_t (2 L S D each) and dv
    // (2 L S Dv): 2 L S (3 D + 2 Dv).
    ArrayRef<int64_t> q = shapeOf(op->getOperand(0)),
                      kt = shapeOf(op->getOperand(1)),
                      v = shapeOf(op->getOperand(2));
    if (q.size() < 2 || kt.size() < 2 || v.size() < 2)
      return out;
    double l = q[q.size() - 2], d = q.back(), s = kt.back(), dv = v.back();
    // Layout bshd: q [B, L, H, D], k [B, S, H, D], v [B, S, H, Dv] (the
    // fsdp op's attribute, or the runtime kernel's param).
    auto params = isa<KernelOp>(op) ? cast<KernelOp>(op).getParamsAttr()
                                    : DictionaryAttr();
    auto layout = params ? params.getAs<StringAttr>("layout")
                         : op->getAttrOfType<StringAttr>("layout");
    if (layout && layout.getValue() == "bshd" && q.size() == 4 &&
        kt.size() == 4)
      l = q[1], s = kt[1];
    double heads =
        l * d == 0 ? 0
                   : static_cast<double>(numelOf(op->getOperand(0).getType())) /
                         (l * d);
    double perHead = kind == "attention" ? 2 * l * s * (d + dv)
                                         : 2 * l * s * (3 * d + 2 * dv);
    return heads * perHead;
  }
  return out;
}

double CostModel::bytes(Operation *op) const {
  if (isFree(op))
    return 0;
  double total = 0;
  for (Type type : op->getOperandTypes())
    total += bytesOf(type);
  for (Type type : op->getResultTypes())
    total += bytesOf(type);
  return total;
}

double CostModel::computeSeconds(Operation *op) const {
  return std::max(flops(op) / peakFlops, bytes(op) / memoryBandwidth);
}

double CostModel::collectiveSeconds(Operation *op,
                                    SymbolTableCollection &symbols,
                                    bool latency) const {
  auto meshRef = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
  if (!meshRef || !axes)
    return 0;
  auto mesh = symbols.lookupNearestSymbolFrom<mesh::MeshOp>(op, meshRef);
  if (!mesh)
    return 0;
  ArrayRef<int64_t> shape = mesh.getShape();
  double ranks = 1;
  for (int16_t axis : axes.asArrayRef())
    ranks *= shape[axis];
  if (ranks <= 1)
    return 0;
  // Within one node: the axes are the mesh's last ones (row-major ranks
  // are contiguous) and span at most a node.
  bool suffix = true;
  SmallVector<int16_t> sorted(axes.asArrayRef());
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    suffix &=
        sorted[i] == static_cast<int16_t>(shape.size() - sorted.size() + i);
  // N: the full (unsharded) buffer's bytes.
  double n = std::max(bytesOf(op->getOperand(0).getType()),
                      bytesOf(op->getResult(0).getType()));
  return ringSeconds(n, ranks, suffix && ranks <= ranksPerNode,
                     isa<AllReduceOp>(op), latency);
}

double CostModel::ringSeconds(double bytes, double ranks, bool intra,
                              bool allReduce, bool latency) const {
  if (ranks <= 1)
    return 0;
  double alpha = intra ? intraLatency : interLatency;
  double beta = 1 / (intra ? intraBandwidth : interBandwidth);
  double steps = ranks - 1;
  double time = (latency ? steps * alpha : 0) + steps / ranks * bytes * beta;
  return allReduce ? 2 * time : time;
}

Timeline mlir::fsdp::simulate(func::FuncOp func, const CostModel &model,
                              SymbolTableCollection &symbols) {
  Timeline t;
  double computeClock = 0, commClock = 0;
  // On the CPU runtime, issued collectives wait (in order) for a wait.
  std::vector<std::pair<Operation *, double>> pending;
  auto wait = [&](Operation *collective) {
    if (!model.cpuRuntime) {
      while (!pending.empty() && !t.done.count(collective)) {
        auto [op, duration] = pending.front();
        pending.erase(pending.begin());
        double start = std::max(commClock, computeClock);
        commClock = start + duration;
        t.done[op] = commClock;
        t.events.push_back({op, 1, start, commClock});
      }
    }
    double ready = t.done.lookup(collective);
    if (ready > computeClock) {
      t.exposed[collective] += ready - computeClock;
      t.exposedTotal += ready - computeClock;
      computeClock = ready;
    }
  };
  IntegerAttr lastBucket;
  for (Operation &op : func.getBody().front()) {
    if (isCollective(&op)) {
      // A bucket's collectives go as one group: one latency for all.
      auto bucket = op.getAttrOfType<IntegerAttr>("fsdp.bucket");
      bool grouped = bucket && bucket == lastBucket && !model.cpuRuntime;
      lastBucket = bucket;
      double duration = model.collectiveSeconds(&op, symbols, !grouped);
      t.communication += duration;
      if (model.cpuRuntime) {
        double start = std::max(commClock, computeClock);
        commClock = start + duration;
        t.done[&op] = commClock;
        t.events.push_back({&op, 1, start, commClock});
      } else {
        pending.push_back({&op, duration});
      }
      if (!isa<FutureType>(op.getResult(0).getType()))
        wait(&op); // synchronous: the result is needed at once
    } else if (auto w = dyn_cast<WaitOp>(op)) {
      wait(w.getFuture().getDefiningOp());
    } else {
      double duration = model.computeSeconds(&op);
      if (duration > 0) {
        t.events.push_back({&op, 0, computeClock, computeClock + duration});
        computeClock += duration;
        t.compute += duration;
      }
    }
    t.reached[&op] = computeClock;
  }
  for (auto [op, duration] : pending) { // never waited for
    double start = std::max(commClock, computeClock);
    commClock = start + duration;
    t.done[op] = commClock;
    t.events.push_back({op, 1, start, commClock});
  }
  t.total = std::max(computeClock, commClock);
  return t;
}
