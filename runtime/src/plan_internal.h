//===- plan_internal.h - The loaded plan, shared inside the runtime -*- C++
//-*-===//

#ifndef FSDPRT_SRC_PLAN_INTERNAL_H
#define FSDPRT_SRC_PLAN_INTERNAL_H

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <cstdint>
#include <string>
#include <vector>

/// A verified plan: its bytes and the root table read in place.
struct fsdprt_plan_s {
  std::vector<uint8_t> bytes;
  const fsdprt::plan::Plan *root = nullptr;
};

namespace fsdprt {

/// Where a rank sits in the group formed by some axes of a row-major mesh.
struct GroupPosition {
  int64_t index; // the rank's index within its group
  int64_t size;  // ranks in the group
};
GroupPosition groupPosition(const std::vector<int64_t> &mesh,
                            const std::vector<int64_t> &axes, int64_t rank);

/// Checks a verified plan's mesh, flat units, streams and collectives;
/// returns "" or what is wrong.
std::string checkSharding(const plan::Plan &plan);

/// The bytes of all the plan's arenas (what a session allocates per rank,
/// before kernel workspace); saturates at UINT64_MAX.
uint64_t arenaBytes(const plan::Plan &plan);

} // namespace fsdprt

#endif // FSDPRT_SRC_PLAN_INTERNAL_H
