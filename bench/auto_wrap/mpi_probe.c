/* Measures this machine's MPI all-gather for the cost model: the seconds
 * of an MPI_Allgather of a small and of a large buffer over all ranks of
 * the job, best of several repetitions. Rank 0 prints one JSON line:
 *   {"ranks": P, "small_bytes": n, "small_seconds": t, "large_bytes": N,
 *    "large_seconds": T}
 * The benchmark fits alpha (latency per ring step) and beta (seconds per
 * byte) of (P-1) alpha + (P-1)/P N beta to the two points.
 *
 *   mpicc -O2 mpi_probe.c -o mpi_probe && mpirun -np 4 ./mpi_probe
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double best_allgather(long total_bytes, int ranks, int repeats) {
  long each = total_bytes / ranks;
  char *in = calloc((size_t)each, 1), *out = calloc((size_t)each * ranks, 1);
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    MPI_Allgather(in, (int)each, MPI_BYTE, out, (int)each, MPI_BYTE,
                  MPI_COMM_WORLD);
    double seconds = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (slowest < best)
      best = slowest;
  }
  free(in);
  free(out);
  return best;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  long small = 64L * ranks, large = 8L << 20;
  double t_small = best_allgather(small, ranks, 200);
  double t_large = best_allgather(large, ranks, 20);
  if (rank == 0)
    printf("{\"ranks\": %d, \"small_bytes\": %ld, \"small_seconds\": %.9g, "
           "\"large_bytes\": %ld, \"large_seconds\": %.9g}\n",
           ranks, small, t_small, large, t_large);
  MPI_Finalize();
  return 0;
}
