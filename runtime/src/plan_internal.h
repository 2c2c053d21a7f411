//===- plan_internal.h - The loaded plan, shared inside the runtime -*- C++ -*-===//

#ifndef FSDPRT_SRC_PLAN_INTERNAL_H
#define FSDPRT_SRC_PLAN_INTERNAL_H

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <cstdint>
#include <vector>

/// A verified plan: its bytes and the root table read in place.
struct fsdprt_plan_s {
  std::vector<uint8_t> bytes;
  const fsdprt::plan::Plan *root = nullptr;
};

#endif // FSDPRT_SRC_PLAN_INTERNAL_H
