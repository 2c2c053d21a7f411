//===- status.cpp - fsdprt_status_t ---------------------------------------===//

#include "status.h"

#include <new>

struct fsdprt_status_s {
  fsdprt_status_code_t code;
  std::string message;
  bool agreed = false;
};

namespace {
fsdprt_status_s outOfMemory{FSDPRT_RESOURCE_EXHAUSTED,
                            "out of memory while reporting an error"};
} // namespace

fsdprt_status_t fsdprt::makeStatus(fsdprt_status_code_t code,
                                   std::string message) {
  try {
    return new fsdprt_status_s{code, std::move(message)};
  } catch (...) {
    return &outOfMemory;
  }
}

fsdprt_status_t fsdprt::markAgreed(fsdprt_status_t status) {
  if (status && status != &outOfMemory)
    status->agreed = true;
  return status;
}

extern "C" {

fsdprt_status_code_t fsdprt_status_code(fsdprt_status_t status) {
  return status ? status->code : FSDPRT_OK;
}

int fsdprt_status_agreed(fsdprt_status_t status) {
  return status && (status->agreed || status->code == FSDPRT_PEER_FAILED);
}

const char *fsdprt_status_message(fsdprt_status_t status) {
  return status ? status->message.c_str() : "";
}

const char *fsdprt_status_code_name(fsdprt_status_code_t code) {
  switch (code) {
  case FSDPRT_OK:
    return "OK";
  case FSDPRT_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case FSDPRT_OUT_OF_RANGE:
    return "OUT_OF_RANGE";
  case FSDPRT_NOT_FOUND:
    return "NOT_FOUND";
  case FSDPRT_INCOMPATIBLE:
    return "INCOMPATIBLE";
  case FSDPRT_IO_ERROR:
    return "IO_ERROR";
  case FSDPRT_RESOURCE_EXHAUSTED:
    return "RESOURCE_EXHAUSTED";
  case FSDPRT_UNAVAILABLE:
    return "UNAVAILABLE";
  case FSDPRT_INTERNAL:
    return "INTERNAL";
  case FSDPRT_PEER_FAILED:
    return "PEER_FAILED";
  }
  return "UNKNOWN";
}

void fsdprt_status_free(fsdprt_status_t status) {
  if (status != &outOfMemory)
    delete status;
}

} // extern "C"
