//===- PrintLayout.cpp - Print flat-parameter layouts and shards ----------===//
//
/// Prints, for every fsdp.flat_param, where each member parameter lies in the
/// flat buffer and which pieces of which parameters each rank's shard holds.
/// All numbers come from the layout library (fsdp/layout/FlatLayout.h), the
/// same code the runtime uses to find a rank's bytes.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_PRINTLAYOUT
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

void printRange(raw_ostream &os, ::fsdp::layout::Range range) {
  os << "[" << range.begin << ", " << range.end << ")";
}

struct PrintLayoutPass
    : mlir::fsdp::impl::PrintLayoutBase<PrintLayoutPass> {
  using PrintLayoutBase::PrintLayoutBase;

  void runOnOperation() override {
    SymbolTableCollection symbolTable;
    raw_ostream &os = llvm::outs();
    WalkResult result = getOperation().walk([&](FlatParamOp unit) {
      FailureOr<::fsdp::layout::FlatLayout> layout =
          computeLayout(unit, symbolTable);
      FailureOr<SmallVector<ParamOp>> params = resolveParams(unit, symbolTable);
      if (failed(layout) || failed(params))
        return WalkResult::interrupt();
      if (failed(printUnit(os, unit, *layout, *params)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
    markAllAnalysesPreserved();
  }

  LogicalResult printUnit(raw_ostream &os, FlatParamOp unit,
                          const ::fsdp::layout::FlatLayout &layout,
                          MutableArrayRef<ParamOp> params) {
    os << "flat_param @" << unit.getSymName() << ": " << params.size()
       << " params, " << layout.paramsNumel() << " elements, padded "
       << layout.paddedNumel() << ", world size " << layout.worldSize()
       << ", shard " << layout.shardNumel();
    if (layout.alignment() != 1)
      os << ", alignment " << layout.alignment();
    os << "\n";
    for (auto [index, param] : llvm::enumerate(params)) {
      os << "  param @" << param.getSymName() << " " << param.getType() << " ";
      printRange(os, layout.paramRange(index));
      os << "\n";
    }

    SmallVector<int64_t> selected(ranks.begin(), ranks.end());
    if (selected.empty())
      for (int64_t rank = 0; rank < layout.worldSize(); ++rank)
        selected.push_back(rank);
    for (int64_t rank : selected) {
      if (rank < 0 || rank >= layout.worldSize())
        return unit.emitOpError() << "cannot print rank " << rank
                                  << ": the world size is "
                                  << layout.worldSize();
      os << "  rank " << rank << " ";
      printRange(os, layout.shardRange(rank));
      os << ":";
      for (const ::fsdp::layout::ParamShard &piece : layout.paramShards(rank)) {
        os << " @" << params[piece.paramIndex].getSymName();
        printRange(os, piece.inParam);
        os << "->";
        printRange(os, piece.inShard);
      }
      if (int64_t padding = layout.shardPadding(rank))
        os << " padding " << padding;
      os << "\n";
    }
    return success();
  }
};

} // namespace
