//===- half.h - bf16 and f16 storage: conversions to and from fp32 -*- C++ -*-===//
//
// Half-precision tensors are stored as 16-bit patterns and computed in
// fp32: widened exactly, rounded back to nearest-even (NaN stays NaN;
// values past f16's range become infinity), as torch's c10::BFloat16 and
// c10::Half do. Used by the CPU backend (casts, and kernels on half
// tensors) and by the MPI communicator (collectives of half tensors).
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_SRC_HALF_H
#define FSDPRT_SRC_HALF_H

#include "fsdprt/fsdprt.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <string.h>

// The conversions compile for the GPU too (the CUDA backend's cast kernel).
#if defined(__CUDACC__)
#define FSDPRT_HALF_HD __host__ __device__
#else
#define FSDPRT_HALF_HD
#endif

namespace fsdprt {

FSDPRT_HALF_HD inline bool isHalf(fsdprt_dtype_t dtype) {
  return dtype == FSDPRT_BF16 || dtype == FSDPRT_F16;
}

/// The fp32 value of bf16 or f16 bit pattern `h`.
FSDPRT_HALF_HD inline float halfToFloat(uint16_t h, fsdprt_dtype_t dtype) {
  uint32_t bits;
  if (dtype == FSDPRT_BF16) {
    bits = static_cast<uint32_t>(h) << 16;
  } else { // IEEE binary16
    uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1F,
             mantissa = h & 0x3FF;
    if (exponent == 0x1F) { // inf, nan
      bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      bits = sign;
    } else { // subnormal: normalise
      int shift = 0;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        ++shift;
      }
      bits = sign | ((113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
    }
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/// `f` rounded to the nearest bf16 or f16 (ties to even).
FSDPRT_HALF_HD inline uint16_t floatToHalf(float f, fsdprt_dtype_t dtype) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if (dtype == FSDPRT_BF16) {
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // nan stays nan
      return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
    return static_cast<uint16_t>(bits >> 16);
  }
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)
    return static_cast<uint16_t>(sign | 0x7E00);
  if (magnitude >= 0x477FF000u) // rounds past 65504: infinity
    return static_cast<uint16_t>(sign | 0x7C00);
  if (magnitude < 0x38800000u) { // subnormal or zero in binary16
    float value;
    memcpy(&value, &magnitude, 4);
    // Units of 2^-24, rounded to nearest even by the FPU.
    return static_cast<uint16_t>(
        sign | static_cast<uint32_t>(nearbyintf(value * 16777216.0f)));
  }
  uint32_t rounded = magnitude + 0xFFF + ((magnitude >> 13) & 1);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

} // namespace fsdprt

#endif // FSDPRT_SRC_HALF_H
