//===- Phases.cpp - Values made from a unit's parameters alone ------------===//
//
/// What fsdp-shard re-makes from each gather and fsdp-check-reshard checks:
/// the values computed only from one unit's gathered buffer and constants.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/Phases.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <queue>

using namespace mlir;
using namespace mlir::fsdp;

/// Whether `op` computes its results from its operands alone: no memory
/// effects, no regions (a collective, a release or a dropout is not).
static bool computesOnly(Operation *op) {
  return op->getNumResults() > 0 && op->getNumRegions() == 0 &&
         isMemoryEffectFree(op);
}

bool DerivedValues::isConstant(Value value) {
  // Iterative: a chain of constant ops can be as long as a model makes it.
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Value v = work.back();
    if (constant.count(v)) {
      work.pop_back();
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!def || !computesOnly(def)) {
      constant[v] = false;
      work.pop_back();
      continue;
    }
    bool pending = false, all = true;
    for (Value operand : def->getOperands()) {
      auto known = constant.find(operand);
      if (known == constant.end()) {
        work.push_back(operand);
        pending = true;
      } else {
        all &= known->second;
      }
    }
    if (pending)
      continue;
    for (Value result : def->getResults())
      constant[result] = all;
    work.pop_back();
  }
  return constant.lookup(value);
}

void DerivedValues::collect(ValueRange sources) {
  ops.clear();
  uses.clear();
  values.clear();
  values.insert(sources.begin(), sources.end());
  // Users in block order, so every operand is decided before its user.
  auto later = [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); };
  std::priority_queue<Operation *, std::vector<Operation *>, decltype(later)>
      queue(later);
  llvm::DenseSet<Operation *> seen;
  auto enqueueUsers = [&](Value value) {
    for (Operation *user : value.getUsers())
      if (seen.insert(user).second)
        queue.push(user);
  };
  for (Value source : sources)
    enqueueUsers(source);
  while (!queue.empty()) {
    Operation *op = queue.top();
    queue.pop();
    bool derived = false;
    if (auto view = dyn_cast<ViewLikeOpInterface>(op)) {
      derived = values.contains(view.getViewSource());
    } else if (computesOnly(op)) {
      derived = llvm::all_of(op->getOperands(), [&](Value operand) {
        return values.contains(operand) || isConstant(operand);
      });
    }
    if (derived) {
      ops.push_back(op);
      for (Value result : op->getResults()) {
        values.insert(result);
        enqueueUsers(result);
      }
      continue;
    }
    for (OpOperand &operand : op->getOpOperands())
      if (values.contains(operand.get()))
        uses.push_back(&operand);
  }
}
