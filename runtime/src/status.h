//===- status.h - Internal helpers for fsdprt_status_t ---------*- C++ -*-===//

#ifndef FSDPRT_SRC_STATUS_H
#define FSDPRT_SRC_STATUS_H

#include "fsdprt/fsdprt.h"

#include <string>

namespace fsdprt {

/// Returns a new status with `code` and `message`. Never fails: when memory
/// runs out it returns a shared static status that fsdprt_status_free skips.
fsdprt_status_t makeStatus(fsdprt_status_code_t code, std::string message);

/// Marks `status` (a failure every rank returns from the same call, learned
/// in a collective they all completed: fsdprt_status_agreed) agreed and
/// returns it.
fsdprt_status_t markAgreed(fsdprt_status_t status);

/// Runs `body` (returning fsdprt_status_t) and turns any C++ exception into a
/// status, so nothing escapes through the C ABI.
template <typename Body>
fsdprt_status_t guarded(const char *function, Body &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return makeStatus(FSDPRT_RESOURCE_EXHAUSTED,
                      std::string(function) + ": out of memory");
  } catch (const std::exception &e) {
    return makeStatus(FSDPRT_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return makeStatus(FSDPRT_INTERNAL,
                      std::string(function) + ": unknown exception");
  }
}

} // namespace fsdprt

#endif // FSDPRT_SRC_STATUS_H
