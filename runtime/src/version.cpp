//===- version.cpp - Library version queries ------------------------------===//

#include "fsdprt/fsdprt.h"

extern "C" {

void fsdprt_version(int *major, int *minor, int *patch) {
  if (major)
    *major = FSDPRT_VERSION_MAJOR;
  if (minor)
    *minor = FSDPRT_VERSION_MINOR;
  if (patch)
    *patch = FSDPRT_VERSION_PATCH;
}

const char *fsdprt_version_string(void) { return FSDPRT_VERSION_STRING; }

} // extern "C"
