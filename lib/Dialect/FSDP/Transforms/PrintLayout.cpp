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
#include "fsdp/Support/Files.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
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
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    if (format != "text" && format != "json") {
      emitError(getOperation().getLoc())
          << "format must be 'text' or 'json', got '" << format << "'";
      return signalPassFailure();
    }
    // Built in memory and written once every unit is known good: the file
    // was opened (truncated) first and removed when a unit failed.
    std::string text;
    llvm::raw_string_ostream os(text);
    SymbolTableCollection symbolTable;
    llvm::json::Array units;
    WalkResult result = getOperation().walk([&](FlatParamOp unit) {
      FailureOr<::fsdp::layout::FlatLayout> layout =
          computeLayout(unit, symbolTable);
      FailureOr<SmallVector<ParamOp>> params = resolveParams(unit, symbolTable);
      if (failed(layout) || failed(params) ||
          failed(checkRanks(unit, *layout)))
        return WalkResult::interrupt();
      if (format == "json")
        units.push_back(unitJson(unit, *layout, *params));
      else
        printUnit(os, unit, *layout, *params);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    if (format == "json")
      os << llvm::formatv("{0:2}", llvm::json::Value(std::move(units))) << "\n";
    if (failed(writeReport(getOperation(), file, text)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }

  /// The ranks to report: the `ranks` option, or every rank.
  SmallVector<int64_t> selectedRanks(const ::fsdp::layout::FlatLayout &layout) {
    SmallVector<int64_t> selected(ranks.begin(), ranks.end());
    if (selected.empty())
      for (int64_t rank = 0; rank < layout.worldSize(); ++rank)
        selected.push_back(rank);
    return selected;
  }

  LogicalResult checkRanks(FlatParamOp unit,
                           const ::fsdp::layout::FlatLayout &layout) {
    for (int64_t rank : ranks)
      if (rank < 0 || rank >= layout.worldSize())
        return unit.emitOpError() << "cannot print rank " << rank
                                  << ": the world size is "
                                  << layout.worldSize();
    return success();
  }

  llvm::json::Object unitJson(FlatParamOp unit,
                              const ::fsdp::layout::FlatLayout &layout,
                              MutableArrayRef<ParamOp> params) {
    llvm::json::Array paramList;
    for (auto [index, param] : llvm::enumerate(params)) {
      llvm::json::Array aliases, shape;
      if (std::optional<ArrayAttr> names = param.getAliases())
        for (StringAttr alias : names->getAsRange<StringAttr>())
          aliases.push_back(alias.getValue());
      for (int64_t dim : param.getTensorType().getShape())
        shape.push_back(dim);
      paramList.push_back(llvm::json::Object{
          {"fqn", param.getSymName()},
          {"aliases", std::move(aliases)},
          {"shape", std::move(shape)},
          {"numel", layout.paramNumel(index)},
          {"offset", layout.paramRange(index).begin}});
    }
    llvm::json::Array rankList;
    for (int64_t rank : selectedRanks(layout)) {
      llvm::json::Array pieces;
      for (const ::fsdp::layout::ParamShard &piece : layout.paramShards(rank))
        pieces.push_back(llvm::json::Object{
            {"param", piece.paramIndex},
            {"param_begin", piece.inParam.begin},
            {"param_end", piece.inParam.end},
            {"shard_begin", piece.inShard.begin},
            {"shard_end", piece.inShard.end}});
      ::fsdp::layout::Range range = layout.shardRange(rank);
      rankList.push_back(llvm::json::Object{
          {"rank", rank},
          {"begin", range.begin},
          {"end", range.end},
          {"padding", layout.shardPadding(rank)},
          {"pieces", std::move(pieces)}});
    }
    auto typeName = [](Type type) {
      std::string name;
      llvm::raw_string_ostream(name) << type;
      return name;
    };
    // The unit's configuration from fsdp-auto-wrap; PyTorch's defaults
    // (FULL_SHARD, no mixed precision) where it has none.
    UnitConfigAttr config =
        FSDPDialect::ConfigAttrHelper(unit->getContext()).getAttr(unit);
    auto setting = [&](Type (UnitConfigAttr::*field)()
                           const) -> llvm::json::Value {
      Type type = config ? (config.*field)() : Type();
      return type ? llvm::json::Value(typeName(type)) : nullptr;
    };
    return llvm::json::Object{
        {"unit", unit.getSymName()},
        {"module", unit.getModule().value_or(unit.getSymName())},
        {"strategy",
         stringifyShardingStrategy(UnitConfigAttr::strategyOf(config))},
        {"dtype", typeName(unit.getTensorType().getElementType())},
        {"param_dtype", setting(&UnitConfigAttr::getParamDtype)},
        {"reduce_dtype", setting(&UnitConfigAttr::getReduceDtype)},
        {"buffer_dtype", setting(&UnitConfigAttr::getBufferDtype)},
        {"world_size", layout.worldSize()},
        {"alignment", layout.alignment()},
        {"params", std::move(paramList)},
        {"numel", layout.unpaddedNumel()},
        {"params_numel", layout.paramsNumel()},
        {"padded_numel", layout.paddedNumel()},
        {"shard_numel", layout.shardNumel()},
        {"ranks", std::move(rankList)}};
  }

  void printUnit(raw_ostream &os, FlatParamOp unit,
                 const ::fsdp::layout::FlatLayout &layout,
                 MutableArrayRef<ParamOp> params) {
    os << "flat_param " << FlatSymbolRefAttr::get(unit.getSymNameAttr())
       << ": " << params.size()
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

    for (int64_t rank : selectedRanks(layout)) {
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
  }
};

} // namespace
