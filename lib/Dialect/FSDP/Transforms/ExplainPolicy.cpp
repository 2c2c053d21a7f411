//===- ExplainPolicy.cpp - Print fsdp-auto-wrap policy=auto's decision ----===//
//
/// Reads what fsdp-auto-wrap policy=auto recorded (`fsdp.auto_wrap`, the
/// units in `fsdp.units`, the module tree) and prints it for a person:
/// the chosen units, folded where identical units repeat, the schedule,
/// the modelled figures, and the hand policies beside them.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/CostModel.h"
#include "fsdp/Dialect/FSDP/Analysis/WrapSearch.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_EXPLAINPOLICY
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

std::string ms(double seconds) {
  return llvm::formatv("{0:F4} ms", seconds * 1e3).str();
}

/// "layers.12.mlp" -> ("layers.", 12, ".mlp"); no index: nothing.
std::optional<std::tuple<std::string, int64_t, std::string>>
splitIndex(StringRef fqn) {
  SmallVector<StringRef> parts;
  fqn.split(parts, '.');
  for (size_t i = parts.size(); i-- > 0;) {
    int64_t index;
    if (parts[i].getAsInteger(10, index))
      continue;
    std::string before, after;
    for (size_t j = 0; j < i; ++j)
      before += parts[j].str() + ".";
    for (size_t j = i + 1; j < parts.size(); ++j)
      after += "." + parts[j].str();
    return std::make_tuple(before, index, after);
  }
  return std::nullopt;
}

/// One unit (or, folded, a run of identical ones) as printed.
struct UnitRow {
  std::string first, last, className, strategy;
  int64_t numel = 0, count = 1;
};

/// An evaluation's modelled step.
double stepOf(WrapEvaluationAttr e) {
  return e.getStepSeconds().getValueAsDouble();
}

struct ExplainPolicyPass
    : mlir::fsdp::impl::ExplainPolicyBase<ExplainPolicyPass> {
  using ExplainPolicyBase::ExplainPolicyBase;

  void printJson(AutoWrapRecordAttr record, ArrayRef<UnitRow> units) {
    auto evaluation = [&](WrapEvaluationAttr e) {
      llvm::json::Object object{{"policy", e.getPolicy()}};
      if (StringAttr invalid = e.getInvalid()) {
        object["invalid"] = invalid.getValue();
        return object;
      }
      object["units"] = e.getUnits();
      object["step_seconds"] = stepOf(e);
      object["peak_bytes"] = e.getPeakBytes();
      object["fits"] = e.getFits().getValue();
      return object;
    };
    llvm::json::Object chosen = evaluation(record.getChosen());
    llvm::json::Array unitArray, parts, hand, same;
    for (const UnitRow &row : units)
      unitArray.push_back(llvm::json::Object{{"module", row.first},
                                             {"class", row.className},
                                             {"numel", row.numel},
                                             {"strategy", row.strategy}});
    chosen["units"] = std::move(unitArray);
    chosen["schedule"] = llvm::json::Object{
        {"forward_prefetch", record.getForwardPrefetch().getValue()},
        {"backward_prefetch", record.getBackwardPrefetch()},
        {"limit_all_gathers", record.getLimitAllGathers()},
        {"bucket_bytes", record.getBucketBytes()}};
    chosen["peak_at"] = record.getPeakAt();
    for (PeakPartAttr part : record.getPeakPartList())
      parts.push_back(llvm::json::Object{{"part", part.getPart()},
                                         {"bytes", part.getBytes()}});
    chosen["peak_parts"] = std::move(parts);
    for (WrapEvaluationAttr e : record.getHandPolicyList())
      hand.push_back(evaluation(e));
    for (SameUnitsAttr entry : record.getSameUnitsList())
      same.push_back(
          llvm::json::Object{{"policy", entry.getPolicy()},
                             {"same_units_as", entry.getSameUnitsAs()}});
    llvm::json::Object root{{"world_size", record.getWorldSize()},
                            {"memory_budget", record.getMemoryBudget()},
                            {"chosen", std::move(chosen)},
                            {"evaluated", record.getEvaluated()},
                            {"boundaries", record.getBoundaries()},
                            {"hand_policies", std::move(hand)},
                            {"same_units", std::move(same)}};
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)))
                 << "\n";
  }

  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (format != "text" && format != "json") {
      module.emitError() << "format must be text or "
                            "json, not '"
                         << format << "'";
      return signalPassFailure();
    }
    AutoWrapRecordAttr record =
        FSDPDialect::AutoWrapAttrHelper(&getContext()).getAttr(module);
    if (!record) {
      module.emitError("nothing to explain: run "
                       "fsdp-auto-wrap with policy=auto first (and before "
                       "this pass)");
      return signalPassFailure();
    }
    SmallVector<UnitRow> units, rows;
    if (failed(collectUnits(module, units, rows)))
      return signalPassFailure();
    if (format == "json")
      return printJson(record, units);
    llvm::raw_ostream &os = llvm::outs();
    printSettings(module, record, os);
    printChosen(record, rows, os);
    printHandPolicies(record, os);
  }

  /// The units, and in `rows` identical neighbours (same class, size and
  /// strategy, consecutive indices) folded into one line for the text.
  LogicalResult collectUnits(ModuleOp module, SmallVector<UnitRow> &units,
                             SmallVector<UnitRow> &rows) {
    FailureOr<SmallVector<ModuleAttr>> tree = getModuleTree(module);
    if (failed(tree))
      return failure();
    llvm::StringMap<StringRef> classOf;
    for (ModuleAttr m : *tree)
      classOf[m.getFqn()] = m.getClassName();
    ArrayAttr unitList =
        FSDPDialect::UnitsAttrHelper(&getContext()).getAttr(module);
    if (!unitList)
      return module.emitError()
             << "the module has policy=auto's record but no '"
             << FSDPDialect::UnitsAttrHelper::getNameStr() << "'";
    SymbolTable symbols(module);
    for (auto unit : unitList.getAsRange<WrapUnitAttr>()) {
      UnitRow row;
      row.first = row.last = unit.getModule().str();
      row.className = classOf.lookup(unit.getModule()).str();
      row.strategy = stringifyShardingStrategy(unit.getStrategy()).str();
      for (auto ref : unit.getParams().getAsRange<FlatSymbolRefAttr>())
        if (auto param = symbols.lookup<ParamOp>(ref.getValue()))
          row.numel += param.getTensorType().getNumElements();
      units.push_back(row);
      if (!rows.empty()) {
        UnitRow &prev = rows.back();
        auto a = splitIndex(prev.last), b = splitIndex(row.first);
        if (a && b && std::get<0>(*a) == std::get<0>(*b) &&
            std::get<2>(*a) == std::get<2>(*b) &&
            std::get<1>(*a) + 1 == std::get<1>(*b) &&
            prev.className == row.className && prev.numel == row.numel &&
            prev.strategy == row.strategy) {
          prev.last = row.first;
          ++prev.count;
          continue;
        }
      }
      rows.push_back(row);
    }
    return success();
  }

  /// The search's setting: ranks, budget, what was modelled, the cost model.
  void printSettings(ModuleOp module, AutoWrapRecordAttr record,
                     llvm::raw_ostream &os) {
    int64_t budget = record.getMemoryBudget();
    os << "fsdp-explain-policy: policy=auto over " << record.getWorldSize()
       << " ranks";
    if (DenseI64ArrayAttr mesh = record.getMeshShape())
      os << " (mesh " << mesh[0] << " x " << mesh[1] << ")";
    if (budget)
      os << ", memory budget " << formatBytes(budget) << " (" << budget
         << " bytes) per rank\n";
    else
      os << ", no memory budget\n";
    os << "  modelled: "
       << (record.getTraining().getValue()
               ? "a training step, " +
                     std::to_string(record.getOptimizerStates()) +
                     " optimizer state tensors per parameter"
               : std::string("a forward"))
       << "\n";
    CostModel cost = CostModel::of(module);
    os << llvm::formatv("  cost model: {0:F1} TFLOP/s, {1:F1} GB/s memory; "
                        "intra-node {2:F1} GB/s, {3:F2} us; inter-node "
                        "{4:F1} GB/s, {5:F2} us; {6} ranks per node; {7}\n",
                        cost.peakFlops / 1e12, cost.memoryBandwidth / 1e9,
                        cost.intraBandwidth / 1e9, cost.intraLatency * 1e6,
                        cost.interBandwidth / 1e9, cost.interLatency * 1e6,
                        cost.ranksPerNode,
                        cost.cpuRuntime ? "CPU runtime (no overlap)"
                                        : "communication overlaps compute");
  }

  /// The chosen configuration: its figures, schedule, peak, units.
  void printChosen(AutoWrapRecordAttr record, ArrayRef<UnitRow> rows,
                   llvm::raw_ostream &os) {
    int64_t budget = record.getMemoryBudget();
    WrapEvaluationAttr chosen = record.getChosen();
    os << "chosen: " << chosen.getUnits() << " units, modelled step "
       << ms(stepOf(chosen)) << ", peak " << formatBytes(chosen.getPeakBytes())
       << " per rank"
       << (budget ? (chosen.getFits().getValue() ? " (fits)" : " (over budget)")
                  : "")
       << "\n";
    os << "  schedule: forward-prefetch="
       << (record.getForwardPrefetch().getValue() ? "true" : "false")
       << " backward-prefetch=" << record.getBackwardPrefetch()
       << " limit-all-gathers=" << record.getLimitAllGathers()
       << " bucket-bytes=" << record.getBucketBytes() << "\n";
    os << "  peak reached in " << record.getPeakAt() << ":";
    for (PeakPartAttr part : record.getPeakPartList())
      os << "\n    " << part.getPart() << ": " << formatBytes(part.getBytes());
    os << "\n";

    os << llvm::formatv("  {0,-36} {1,-24} {2,14} {3}\n", "unit", "class",
                        "params each", "strategy");
    for (const UnitRow &row : rows) {
      std::string name = row.first.empty() ? "(root)" : row.first;
      std::string className = row.className;
      if (row.count > 1) {
        name += " .. " + row.last;
        className = std::to_string(row.count) + " x " + className;
      }
      os << llvm::formatv("  {0,-36} {1,-24} {2,14} {3}\n", name, className,
                          row.numel, row.strategy);
    }
    os << "searched " << record.getEvaluated() << " configurations over "
       << record.getBoundaries() << " sets of unit boundaries\n";
  }

  /// The hand policies beside the chosen one, and those with the units of
  /// one listed before them.
  void printHandPolicies(AutoWrapRecordAttr record, llvm::raw_ostream &os) {
    WrapEvaluationAttr chosen = record.getChosen();
    os << "hand policies ("
       << "each unit FULL_SHARD unless strategy= was "
       << "given; fsdp-schedule's defaults):\n";
    os << llvm::formatv("  {0,-38} {1,6} {2,14} {3,14} {4,5} {5}\n", "policy",
                        "units", "step", "peak", "fits", "step vs auto");
    for (WrapEvaluationAttr hand : record.getHandPolicyList()) {
      StringRef name = hand.getPolicy();
      if (StringAttr invalid = hand.getInvalid()) {
        os << llvm::formatv("  {0,-38} not possible: {1}\n", name,
                            invalid.getValue());
        continue;
      }
      os << llvm::formatv("  {0,-38} {1,6} {2,14} {3,14} {4,5} {5:F2}x\n", name,
                          hand.getUnits(), ms(stepOf(hand)),
                          formatBytes(hand.getPeakBytes()),
                          hand.getFits().getValue() ? "yes" : "no",
                          stepOf(hand) / stepOf(chosen));
    }
    // Runs of size thresholds folded ("size min-num-params=1e4 .. 1e10: the
    // units of no wrapping").
    SmallVector<std::pair<std::string, std::string>> lines;
    StringRef prefix = "size min-num-params=";
    for (SameUnitsAttr entry : record.getSameUnitsList()) {
      std::string name = entry.getPolicy().str();
      std::string as = entry.getSameUnitsAs().str();
      if (!lines.empty() && lines.back().second == as &&
          StringRef(lines.back().first).starts_with(prefix) &&
          StringRef(name).starts_with(prefix)) {
        std::string &first = lines.back().first;
        first = first.substr(0, first.find(" .. ")) + " .. " +
                name.substr(prefix.size());
        continue;
      }
      lines.push_back({name, as});
    }
    for (auto &[name, as] : lines)
      os << "  " << name << ": the units of " << as << "\n";
  }
};

} // namespace
