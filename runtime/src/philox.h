//===- philox.h - Philox-4x32-10, the counter-based generator ---*- C++ -*-===//
//
// Random numbers as a pure function of (key, counter): Philox-4x32-10 of
// Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11), the
// generator of cuRAND and of torch's CUDA dropout. Nothing is carried from
// one call to the next, so any thread of any backend computes any element's
// number directly: a dropout mask is the same at every thread count, on the
// CPU and on the GPU, and is recomputed instead of stored.
//
// The runtime's use (docs/training.md, "Randomness"): key = the session's
// 64-bit seed; counter = (element block low, element block high, op id,
// step), where element block = global element index / 4 and the four
// 32-bit words of one call serve the block's four elements. Dropout keeps
// an element when its word is below a threshold; the generators
// (RandomUniform, RandomNormal, Bernoulli and their -Like forms) map words
// to values through drawValue.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_SRC_PHILOX_H
#define FSDPRT_SRC_PHILOX_H

#include <cmath>
#include <cstdint>

// The generator compiles for the GPU too (a CUDA dropout kernel computes the
// same bits as the CPU's).
#if defined(__CUDACC__)
#define FSDPRT_PHILOX_HD __host__ __device__
#else
#define FSDPRT_PHILOX_HD
#endif

namespace fsdprt {

/// Four 32-bit words: a counter or a result.
struct Philox4x32 {
  uint32_t v[4];
};

/// Philox-4x32-10 of `counter` under key (`key0`, `key1`): ten rounds, each
/// two 32x32->64 multiplications whose halves are mixed with the other
/// words and the round's key; the key grows by the Weyl constants between
/// rounds.
FSDPRT_PHILOX_HD inline Philox4x32 philox4x32(Philox4x32 counter,
                                              uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t *c = counter.v;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ key0,
                        static_cast<uint32_t>(p1),
                        static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ key1,
                        static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i)
      c[i] = next[i];
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

/// Where a random op's numbers come from: its session's seed and step and
/// the op's id; elements are numbered globally (see the file comment).
struct RandomStream {
  uint64_t seed = 0;
  uint32_t step = 0;
  uint32_t op = 0;

  /// The four words for elements [4 * block, 4 * block + 4).
  FSDPRT_PHILOX_HD Philox4x32 block(uint64_t block) const {
    Philox4x32 counter = {{static_cast<uint32_t>(block),
                           static_cast<uint32_t>(block >> 32), op, step}};
    return philox4x32(counter, static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32));
  }

  /// The 32 random bits of global element `element`.
  FSDPRT_PHILOX_HD uint32_t bits(uint64_t element) const {
    return block(element / 4).v[element % 4];
  }
};

/// Whether an element whose bits are `bits` is kept with probability
/// `keep` (a Bernoulli draw): kept when bits < keep * 2^32, the threshold
/// computed once per kernel by keepThreshold.
FSDPRT_PHILOX_HD inline uint64_t keepThreshold(double keep) {
  if (keep <= 0)
    return 0;
  if (keep >= 1)
    return uint64_t(1) << 32;
  return static_cast<uint64_t>(keep * 4294967296.0 + 0.5);
}

/// A uniform number in [0, 1) from 32 random bits: their top 24 bits times
/// 2^-24, exact in float32 and at most 1 - 2^-24, so never 1.
FSDPRT_PHILOX_HD inline double unitInterval(uint32_t bits) {
  return static_cast<double>(bits >> 8) * (1.0 / 16777216.0);
}

/// low + (high - low) * u for u = unitInterval(bits), computed in double and
/// rounded to T (float or double); a value that rounds up to high is the
/// largest T below it, so the result is in [low, high) (low < high). The
/// CPU and the GPU compute the same bits: IEEE double arithmetic and one
/// rounding.
template <typename T>
FSDPRT_PHILOX_HD inline T uniformValue(uint32_t bits, double low, double high) {
  T y = static_cast<T>(low + (high - low) * unitInterval(bits));
  T top = static_cast<T>(high);
  if (y < top)
    return y;
  if constexpr (sizeof(T) == sizeof(float))
    return nextafterf(top, static_cast<float>(low));
  else
    return nextafter(top, low);
}

/// A standard normal number for word `w` (0 to 3) of a block: Box-Muller
/// over the pair of words (w & 2, (w & 2) + 1), u1 = (top 24 bits + 1) *
/// 2^-24 in (0, 1] (so the log is finite; |z| <= 5.77), u2 = unitInterval;
/// the pair's first element takes r cos(2 pi u2), the second r sin.
/// Computed in double.
FSDPRT_PHILOX_HD inline double standardNormal(const Philox4x32 &words, int w) {
  const int first = w & 2;
  double u1 =
      (static_cast<double>(words.v[first] >> 8) + 1.0) * (1.0 / 16777216.0);
  double theta = 6.283185307179586 * unitInterval(words.v[first + 1]);
  double r = sqrt(-2.0 * log(u1));
  return (w & 1) ? r * sin(theta) : r * cos(theta);
}

/// What a random generator kernel draws.
enum class Distribution : uint8_t {
  Uniform,   // in [a, b): uniformValue
  Normal,    // mean a, standard deviation b: a + b * standardNormal
  Bernoulli, // 1 where unitInterval(word) < p, else 0
};

/// The value of word `w` of `words` under `kind`, as T (float or double);
/// `p` is Bernoulli's probability. The one definition the CPU kernels and
/// the CUDA bodies share.
template <typename T>
FSDPRT_PHILOX_HD inline T drawValue(Distribution kind, const Philox4x32 &words,
                                    int w, double a, double b, double p) {
  switch (kind) {
  case Distribution::Uniform:
    return uniformValue<T>(words.v[w], a, b);
  case Distribution::Normal:
    return static_cast<T>(a + b * standardNormal(words, w));
  case Distribution::Bernoulli:
    break;
  }
  return unitInterval(words.v[w]) < p ? T(1) : T(0);
}

} // namespace fsdprt

#endif // FSDPRT_SRC_PHILOX_H
