//===- dtype.cpp - Element types of plan tensors --------------------------===//

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

// A plan's DType and the C API's fsdprt_dtype_t are one list: the runtime
// hands plan dtypes to hosts as they are, and the compiler writes
// fsdprt_dtype_t values into plans (fsdp/Target/Plan/RuntimeDType.h).
#define FSDPRT_SAME_DTYPE(plan_name, c_name)                                   \
  static_assert(static_cast<int>(fsdprt::plan::DType::plan_name) == c_name,    \
                "plan.fbs's DType::" #plan_name " differs from " #c_name)
FSDPRT_SAME_DTYPE(F32, FSDPRT_F32);
FSDPRT_SAME_DTYPE(F16, FSDPRT_F16);
FSDPRT_SAME_DTYPE(BF16, FSDPRT_BF16);
FSDPRT_SAME_DTYPE(F64, FSDPRT_F64);
FSDPRT_SAME_DTYPE(I64, FSDPRT_I64);
FSDPRT_SAME_DTYPE(I32, FSDPRT_I32);
FSDPRT_SAME_DTYPE(I16, FSDPRT_I16);
FSDPRT_SAME_DTYPE(I8, FSDPRT_I8);
FSDPRT_SAME_DTYPE(U8, FSDPRT_U8);
FSDPRT_SAME_DTYPE(Bool, FSDPRT_BOOL);
FSDPRT_SAME_DTYPE(MAX, FSDPRT_BOOL); // and no dtype beyond them
#undef FSDPRT_SAME_DTYPE

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
