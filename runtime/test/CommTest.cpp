//===- CommTest.cpp - The MPI communicator, run under mpirun -np 4 --------===//
//
// Checks the collectives the runtime's sessions use, on 4 ranks laid out
// as a 2x2 mesh: all-gather, reduce-scatter (avg) and all-reduce over the
// whole world and over one mesh axis (HYBRID_SHARD's groups), started
// nonblocking and waited for; bf16 and f16 reduced in fp32 and rounded
// back to nearest-even (MPI has neither type). Prints one line per check
// on rank 0; exits 1 on any failure.
//
//===----------------------------------------------------------------------===//

#include "../src/comm.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0, rank = 0;

void expect(bool ok, const std::string &what) {
  int bad = ok ? 0 : 1, total = 0;
  MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%s: %s\n", total ? "FAIL" : "ok", what.c_str());
  failures += total ? 1 : 0;
}

template <typename T>
fsdprt::Tensor tensor(std::vector<T> &data, fsdprt_dtype_t dtype) {
  return fsdprt::Tensor{data.data(),
                        dtype,
                        {static_cast<int64_t>(data.size())},
                        static_cast<int64_t>(data.size())};
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    if (rank == 0)
      std::fprintf(stderr, "run under mpirun -np 4\n");
    MPI_Finalize();
    return 2;
  }
  std::string error;
  auto comm =
      fsdprt::createMpiCommunicator(fsdprt::mpiWorldF(), {2, 2}, 30.0, error);
  expect(comm != nullptr, "a communicator for a 2x2 mesh " + error);
  if (!comm) {
    MPI_Finalize();
    return 1;
  }
  expect(comm->addGroup({0, 1}).empty() && comm->addGroup({1}).empty(),
         "groups of both axes and of axis 1");
  auto wrong =
      fsdprt::createMpiCommunicator(fsdprt::mpiWorldF(), {3}, 30.0, error);
  expect(!wrong && error.find("the plan is for 3 ranks but the communicator "
                              "has 4") != std::string::npos,
         "a mesh of another size is refused");

  // All-gather over everyone: rank order.
  std::vector<float> mine = {float(rank), float(10 + rank)}, all(8);
  error = comm->allGather({0, 1}, tensor(mine, FSDPRT_F32),
                          tensor(all, FSDPRT_F32), "all_gather");
  expect(error.empty() && all == std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13},
         "all_gather over 4 ranks in rank order");

  // Within axis 1 (pairs {0,1}, {2,3}): started, waited for.
  std::vector<float> pair(4);
  auto pending = comm->start("all_gather", {1}, tensor(mine, FSDPRT_F32),
                             tensor(pair, FSDPRT_F32), fsdprt::Reduction::Sum,
                             "ag", error);
  error = pending ? comm->wait(*pending) : error;
  int base = rank / 2 * 2;
  expect(error.empty() &&
             pair == std::vector<float>{float(base), float(10 + base),
                                        float(base + 1), float(11 + base)},
         "started all_gather within a mesh axis (HYBRID_SHARD's group)");

  // Reduce-scatter, averaged: rank r gets chunk r of the mean.
  std::vector<float> full(8), chunk(2);
  for (int i = 0; i < 8; ++i)
    full[i] = float(i + rank);
  error = comm->reduceScatter({0, 1}, tensor(full, FSDPRT_F32),
                              tensor(chunk, FSDPRT_F32), fsdprt::Reduction::Avg,
                              "reduce_scatter");
  expect(error.empty() && chunk[0] == 2 * rank + 1.5f &&
             chunk[1] == 2 * rank + 2.5f,
         "reduce_scatter avg");

  // bf16: 1 + r/128 is exact; the sum over a pair, 2 + (2b+1)/128, is
  // halfway between two bf16 values at 2 (spacing 1/64): nearest even.
  uint16_t bf = static_cast<uint16_t>(0x3F80 + rank); // 1 + rank/128
  std::vector<uint16_t> in16 = {bf}, out16(1);
  error = comm->allReduce({1}, tensor(in16, FSDPRT_BF16),
                          tensor(out16, FSDPRT_BF16), fsdprt::Reduction::Sum,
                          "all_reduce bf16");
  // Pair {0,1}: 2 + 1/128, halfway between 2 (0x4000) and 2 + 1/64: to
  // the even one, 0x4000. Pair {2,3}: 2 + 5/128, halfway between 2 + 2/64
  // (0x4002) and 2 + 3/64 (0x4003): to the even one, 0x4002.
  uint16_t want = rank < 2 ? 0x4000 : 0x4002;
  expect(error.empty() && out16[0] == want,
         "bf16 all_reduce sums in fp32 and rounds to nearest even");

  // f16 through an all-gather: every value representable in binary16
  // (a subnormal, the largest finite, negative zero, infinity) survives.
  std::vector<uint16_t> halves = {0x0001, 0x7BFF, 0x8000, 0x7C00}, gathered(16);
  error = comm->allGather({0, 1}, tensor(halves, FSDPRT_F16),
                          tensor(gathered, FSDPRT_F16), "all_gather f16");
  bool same = error.empty();
  for (int i = 0; i < 16; ++i)
    same &= gathered[i] == halves[i % 4];
  expect(same, "f16 values cross MPI unchanged");
  // f16 sum: 1 + r/1024 over a pair, halfway at spacing 1/512: even.
  std::vector<uint16_t> h = {static_cast<uint16_t>(0x3C00 + rank)}, hs(1);
  error = comm->allReduce({1}, tensor(h, FSDPRT_F16), tensor(hs, FSDPRT_F16),
                          fsdprt::Reduction::Sum, "all_reduce f16");
  expect(error.empty() && hs[0] == (rank < 2 ? 0x4000 : 0x4002),
         "f16 all_reduce sums in fp32 and rounds to nearest even");

  comm.reset();
  MPI_Finalize();
  return failures ? 1 : 0;
}
