//===- dtype.cpp - Element types of plan tensors --------------------------===//

#include "fsdprt/fsdprt.h"

extern "C" {

size_t fsdprt_dtype_size(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F64:
  case FSDPRT_I64:
    return 8;
  case FSDPRT_F32:
  case FSDPRT_I32:
    return 4;
  case FSDPRT_F16:
  case FSDPRT_BF16:
  case FSDPRT_I16:
    return 2;
  case FSDPRT_I8:
  case FSDPRT_U8:
  case FSDPRT_BOOL:
    return 1;
  }
  return 0;
}

const char *fsdprt_dtype_name(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32:
    return "float32";
  case FSDPRT_F16:
    return "float16";
  case FSDPRT_BF16:
    return "bfloat16";
  case FSDPRT_F64:
    return "float64";
  case FSDPRT_I64:
    return "int64";
  case FSDPRT_I32:
    return "int32";
  case FSDPRT_I16:
    return "int16";
  case FSDPRT_I8:
    return "int8";
  case FSDPRT_U8:
    return "uint8";
  case FSDPRT_BOOL:
    return "bool";
  }
  return "unknown";
}

} // extern "C"
