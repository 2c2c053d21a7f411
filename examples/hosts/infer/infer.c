/*===- infer.c - An inference host over the fsdprt C API -----------------===*
 *
 * Serves sharded forward passes of a plan compiled for N ranks: every rank
 * of `mpirun -np N infer PLAN ...` holds 1/N of the parameters, takes its
 * slice of the global batch and writes its outputs.
 *
 *   mpirun -np 2 infer model.plan --input input_ids=ids.npy --output-dir out
 *          [--model-dir DIR] [--memory-budget BYTES] [--repeat K]
 *
 * An input file holds the global batch: its first dimension is N times the
 * plan's, and rank r takes the r-th slice (a file of exactly the plan's
 * shape goes whole to every rank). Rank r writes each output as
 * out/rank<r>/<name>.npy, as `fsdp-run --output-dir` does under mpirun.
 * Any error prints "infer: error: ..." and ends every rank (MPI_Abort):
 * no rank is left waiting in a collective.
 *
 *===----------------------------------------------------------------------===*/

#include "npy.h"

#include <fsdprt/fsdprt.h>
#include <mpi.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INPUTS 16

static const char *const usage =
    "usage: infer PLAN --input NAME=FILE.npy ... --output-dir DIR "
    "[--model-dir DIR] [--memory-budget BYTES] [--repeat K]";

static int rank = 0;

/* Prints the error and ends the whole job: the other ranks may be waiting
 * for this one in a collective. */
static void die(const char *format, ...) {
  char message[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  /* One write per line: mpirun interleaves the ranks' partial writes. */
  fprintf(stderr, "infer: error: [rank %d] %s\n", rank, message);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

/* Dies with the status's message and code if the call failed. */
static void check(fsdprt_status_t status, const char *what) {
  if (!status)
    return;
  die("%s: %s (%s)", what, fsdprt_status_message(status),
      fsdprt_status_code_name(fsdprt_status_code(status)));
}

/* mkdir -p: creates `path` and its missing parents. */
static int makeDirectories(const char *path) {
  char partial[4096];
  for (size_t i = 1;; ++i) {
    if (path[i] != '/' && path[i] != '\0')
      continue;
    if (i >= sizeof partial)
      return -1;
    memcpy(partial, path, i);
    partial[i] = '\0';
    if (mkdir(partial, 0777) != 0 && errno != EEXIST)
      return -1;
    if (path[i] == '\0')
      return 0;
  }
}

/* Whether `name` (from the model) is a plain file name: not empty, "." or
 * containing '/', ".." or a control character, any of which could place a
 * file outside the output directory. */
static int isPlainFileName(const char *name) {
  if (!*name || strcmp(name, ".") == 0 || strchr(name, '/') ||
      strstr(name, ".."))
    return 0;
  for (const char *c = name; *c; ++c)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  const char *planPath = NULL, *outputDir = NULL, *modelDir = NULL;
  const char *inputNames[MAX_INPUTS], *inputFiles[MAX_INPUTS];
  size_t numInputs = 0;
  unsigned long long budget = 0;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--input") == 0 && value) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || numInputs == MAX_INPUTS)
        die("--input needs NAME=FILE.npy (at most %d), not '%s'", MAX_INPUTS,
            argv[i]);
      *eq = '\0';
      inputNames[numInputs] = argv[i];
      inputFiles[numInputs++] = eq + 1;
    } else if (strcmp(argv[i], "--output-dir") == 0 && value) {
      outputDir = argv[++i];
    } else if (strcmp(argv[i], "--model-dir") == 0 && value) {
      modelDir = argv[++i];
    } else if (strcmp(argv[i], "--memory-budget") == 0 && value) {
      budget = strtoull(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--repeat") == 0 && value) {
      repeat = atoi(argv[++i]);
    } else if (argv[i][0] != '-' && !planPath) {
      planPath = argv[i];
    } else {
      die("unexpected argument '%s'\n%s", argv[i], usage);
    }
  }
  if (!planPath || !outputDir || repeat < 1)
    die("%s", usage);

  /* The plan, and a check that this job has its world size. */
  fsdprt_plan_t *plan = NULL;
  check(fsdprt_plan_load_file(planPath, &plan), "cannot load the plan");
  if (fsdprt_plan_world_size(plan) != world)
    die("'%s' is a plan for %lld rank(s), but the job has %d", planPath,
        (long long)fsdprt_plan_world_size(plan), world);

  /* Every --input names a declared input, once; every output fits .npy. */
  size_t numDeclared = fsdprt_plan_num_inputs(plan);
  for (size_t j = 0; j < numInputs; ++j) {
    int known = 0;
    for (size_t i = 0; i < numDeclared; ++i) {
      fsdprt_tensor_desc_t desc;
      check(fsdprt_plan_input(plan, i, &desc), "plan input");
      known |= strcmp(inputNames[j], desc.name) == 0;
    }
    if (!known)
      die("the plan has no input '%s' (`fsdp-run %s --describe` lists them)",
          inputNames[j], planPath);
    for (size_t k = 0; k < j; ++k)
      if (strcmp(inputNames[j], inputNames[k]) == 0)
        die("input '%s' is given twice", inputNames[j]);
  }
  for (size_t i = 0; i < fsdprt_plan_num_outputs(plan); ++i) {
    fsdprt_tensor_desc_t desc;
    check(fsdprt_plan_output(plan, i, &desc), "plan output");
    if (!*npy_descr(desc.dtype))
      die("output '%s' is %s, which .npy cannot hold", desc.name,
          fsdprt_dtype_name(desc.dtype));
  }

  /* The session, on this host's own communicator (here the world; a host
   * that is part of a larger MPI program passes a sub-communicator). */
  fsdprt_mpi_options_t mpi = {0, (int)MPI_Comm_c2f(MPI_COMM_WORLD), 60.0};
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.model_dir = modelDir;
  options.memory_budget_bytes = budget;
  options.mpi = &mpi;
  fsdprt_session_t *session = NULL;
  check(fsdprt_session_create_with_options(plan, &options, &session),
        "cannot create the session");
  check(fsdprt_session_load_weights(session), "cannot load the weights");

  /* Each declared input from its file: this rank's slice of the global
   * batch, or the whole file if it has exactly the plan's shape. */
  for (size_t i = 0; i < numDeclared; ++i) {
    fsdprt_tensor_desc_t desc;
    check(fsdprt_plan_input(plan, i, &desc), "plan input");
    const char *file = NULL;
    for (size_t j = 0; j < numInputs; ++j)
      if (strcmp(inputNames[j], desc.name) == 0)
        file = inputFiles[j];
    if (!file)
      die("no --input %s=FILE.npy given for the plan's input '%s'", desc.name,
          desc.name);
    npy_array_t array;
    char error[512];
    if (npy_read(file, &array, error, sizeof error))
      die("input '%s': %s", desc.name, error);
    size_t bytes = npy_tensor_bytes(&desc);
    const char *data = array.data;
    int whole =
        strcmp(array.descr, npy_descr(desc.dtype)) == 0 &&
        array.rank == desc.rank &&
        memcmp(array.shape, desc.shape, desc.rank * sizeof *desc.shape) == 0;
    if (!whole) {
      size_t batches =
          npy_global_batches(&array, file, &desc, world, error, sizeof error);
      if (batches == 0)
        die("input '%s': %s", desc.name, error);
      if (batches != 1)
        die("input '%s': '%s' holds %zu global batches; infer runs one",
            desc.name, file, batches);
      data += bytes * (size_t)rank;
    }
    check(fsdprt_session_set_input(session, desc.name, data, bytes), desc.name);
    npy_free(&array);
  }

  /* Serve: run the forward pass (repeatedly, as a server would). */
  for (int r = 0; r < repeat; ++r)
    check(fsdprt_session_run(session), "the forward pass failed");
  double compute = 0, communication = 0;
  check(fsdprt_session_timings(session, &compute, &communication), "timings");

  /* Outputs: outputDir/rank<r>/<name>.npy. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/rank%d", outputDir, rank);
  if (makeDirectories(dir) != 0)
    die("cannot create the directory '%s'", dir);
  for (size_t i = 0; i < fsdprt_plan_num_outputs(plan); ++i) {
    fsdprt_tensor_desc_t desc;
    check(fsdprt_plan_output(plan, i, &desc), "plan output");
    if (!isPlainFileName(desc.name))
      die("output '%s' cannot be a file name: a name with '/', '..' or a "
          "control character would write outside '%s'",
          desc.name, outputDir);
    size_t bytes = npy_tensor_bytes(&desc);
    void *data = malloc(bytes ? bytes : 1);
    if (!data)
      die("output '%s': out of memory", desc.name);
    check(fsdprt_session_get_output(session, desc.name, data, bytes),
          desc.name);
    char path[4200], error[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, desc.name);
    if (npy_write(path, npy_descr(desc.dtype), desc.shape, desc.rank, data,
                  bytes, error, sizeof error))
      die("output '%s': %s", desc.name, error);
    free(data);
  }
  uint64_t activations = 0, weights = 0;
  check(fsdprt_session_memory(session, &activations, &weights, NULL), "memory");
  printf("infer: rank %d of %d: %d forward pass(es), last %.3f ms compute + "
         "%.3f ms collectives; %llu bytes of weights, %llu of activations; "
         "outputs in %s\n",
         rank, world, repeat, compute * 1e3, communication * 1e3,
         (unsigned long long)weights, (unsigned long long)activations, dir);

  fsdprt_session_destroy(session);
  fsdprt_plan_destroy(plan);
  MPI_Finalize();
  return 0;
}
