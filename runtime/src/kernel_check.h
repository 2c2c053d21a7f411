//===- kernel_check.h - Would a session prepare a plan's kernels? -*- C++ -*-//
//
// The compiler's way to the runtime's own kernel checks: `fsdp-translate
// --mlir-to-plan` asks the CPU backend, through this, whether each kernel of
// the plan it wrote has shapes, dtypes and attributes the backend takes, so
// the compiler never accepts a plan a session would refuse. The answer comes
// from the same kernel factories a session prepares at creation, run on
// tensors bound to no memory (a factory checks and captures; it reads data
// only when its kernel runs). No exceptions cross this header.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_SRC_KERNEL_CHECK_H
#define FSDPRT_SRC_KERNEL_CHECK_H

#include "fsdprt/plan_generated.h"

#include <cstddef>
#include <string>
#include <vector>

namespace fsdprt {

/// A compute kernel of a plan that a backend refuses.
struct KernelRefusal {
  /// The kernel's index in the plan.
  size_t kernel;
  /// The kernel, its operands' dtypes and shapes, and the backend's reason:
  /// "kernel 'add' on (u8 [2, 3], u8 [2, 3]) -> (u8 [2, 3]): ...".
  std::string message;
};

/// Prepares every compute kernel of `plan` (the collectives' stream aside)
/// on the CPU backend, as a session does when it is created; returns those
/// it refuses. `plan` must have been verified (or written by the compiler).
std::vector<KernelRefusal> checkKernelsOnCpu(const plan::Plan &plan);

} // namespace fsdprt

#endif // FSDPRT_SRC_KERNEL_CHECK_H
