//===- CostModel.h - Modelled durations of compute and communication -*- C++
//-*-===//
//
/// The analytical model fsdp-schedule places collectives with and the
/// timeline and unit summary report. Compute: an op takes
/// max(FLOPs / peak FLOP/s, bytes moved / memory bandwidth) (a roofline);
/// FLOPs are counted for matrix products, convolutions and attention, one
/// per output element for everything else. Communication: ring collectives
/// under an alpha-beta model, alpha the per-step latency and beta the
/// inverse link bandwidth: all-gather and reduce-scatter of N bytes over p
/// ranks take (p-1) alpha + (p-1)/p N beta, all-reduce twice that. A group
/// within one node (a suffix of the mesh axes spanning at most
/// ranks-per-node ranks) uses the intra-node link, any other the
/// inter-node one. Defaults: H100 SXM (989 TFLOP/s dense bf16, 3.35 TB/s
/// HBM3), NVLink 4 (450 GB/s per direction, 3 us), 400 Gb/s InfiniBand
/// (50 GB/s, 10 us), 8 GPUs per node.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TRANSFORMS_COSTMODEL_H
#define FSDP_TRANSFORMS_COSTMODEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir::fsdp {

struct CostModel {
  double peakFlops = 989e12;
  double memoryBandwidth = 3.35e12;
  double intraBandwidth = 450e9, intraLatency = 3e-6;
  double interBandwidth = 50e9, interLatency = 10e-6;
  int64_t ranksPerNode = 8;
  /// The CPU runtime's collectives are MPI calls: they make progress only
  /// while the compute stream waits for them (MPI has no asynchronous
  /// progress thread), so their time adds to the step, and a bucket's
  /// collectives are separate calls, each paying its latency. Otherwise
  /// (NCCL on GPUs) collectives run beside compute and a bucket is one
  /// group.
  bool cpuRuntime = false;

  /// The model fsdp-schedule recorded on `module` (`fsdp.cost_model`), or
  /// the defaults.
  static CostModel of(ModuleOp module);
  /// Records the model on `module` for later passes.
  void store(ModuleOp module) const;

  double flops(Operation *op) const;
  double bytes(Operation *op) const;
  /// Seconds `op` computes for; 0 for ops that compute nothing (views,
  /// reads of state, constants, releases, waits).
  double computeSeconds(Operation *op) const;
  /// Seconds a collective (sync or started) communicates for; without
  /// `latency`, its bandwidth term only.
  double collectiveSeconds(Operation *op, SymbolTableCollection &symbols,
                           bool latency = true) const;
  /// Seconds a ring all-gather or reduce-scatter (or, with `allReduce`, an
  /// all-reduce) of a `bytes`-byte buffer over `ranks` ranks takes; without
  /// `latency`, the bandwidth term only (a later member of a bucket, which
  /// starts with the first).
  double ringSeconds(double bytes, double ranks, bool intra, bool allReduce,
                     bool latency = true) const;
};

/// Whether `op` is one of the fsdp collectives.
bool isCollective(Operation *op);

/// The step as the cost model sees it: the compute stream runs ops in
/// order; a collective is issued at its place on the compute stream and
/// runs on the communication stream after the previous collective; a wait
/// (or a synchronous collective) holds the compute stream until the
/// collective is done.
struct Timeline {
  struct Event {
    Operation *op;
    int stream; // 0 compute, 1 communication
    double start, end;
  };
  std::vector<Event> events;
  /// When each collective's communication ends.
  llvm::DenseMap<Operation *, double> done;
  /// Per collective, how long the compute stream waited for it.
  llvm::DenseMap<Operation *, double> exposed;
  /// When each op (release, wait, ...) is reached on the compute stream.
  llvm::DenseMap<Operation *, double> reached;
  double total = 0, compute = 0, communication = 0, exposedTotal = 0;
};

Timeline simulate(func::FuncOp func, const CostModel &model,
                  SymbolTableCollection &symbols);

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_COSTMODEL_H
