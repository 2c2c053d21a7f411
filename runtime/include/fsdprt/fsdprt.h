/*===- fsdprt.h - FSDP-MLIR runtime C API -------------------------*- C -*-===*
 *
 * The runtime's public C API. Rules that hold for every function here:
 *  - Objects are opaque handles created and destroyed by the library.
 *  - Functions that can fail return an fsdprt_status_t: NULL means success;
 *    anything else carries a code and a message and must be released with
 *    fsdprt_status_free. The library never aborts or exits its host.
 *  - Output parameters are written only on success.
 *  - The header compiles as C99 and C++17; only fsdprt_* symbols are exported.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FSDPRT_FSDPRT_H
#define FSDPRT_FSDPRT_H

#include <stddef.h>
#include <stdint.h>

#if defined(FSDPRT_STATIC)
#define FSDPRT_API
#elif defined(_WIN32)
#if defined(FSDPRT_BUILDING_LIBRARY)
#define FSDPRT_API __declspec(dllexport)
#else
#define FSDPRT_API __declspec(dllimport)
#endif
#else
#define FSDPRT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Versions
 *===----------------------------------------------------------------------===*/

/** Version of this header. Compare with fsdprt_version() at run time to detect
 *  a host built against a different runtime than the one it loaded. */
#define FSDPRT_VERSION_MAJOR 0
#define FSDPRT_VERSION_MINOR 1
#define FSDPRT_VERSION_PATCH 0

/** Writes the loaded library's version. Any pointer may be NULL. */
FSDPRT_API void fsdprt_version(int *major, int *minor, int *patch);

/** The loaded library's version as "MAJOR.MINOR.PATCH"; static storage. */
FSDPRT_API const char *fsdprt_version_string(void);

/*===----------------------------------------------------------------------===*
 * Status
 *===----------------------------------------------------------------------===*/

/** What kind of failure a status reports. */
typedef enum fsdprt_status_code_e {
  FSDPRT_OK = 0,
  /** An argument is malformed: a NULL handle, a negative size, ... */
  FSDPRT_INVALID_ARGUMENT = 1,
  /** An index (a rank, a parameter) is outside its valid range. */
  FSDPRT_OUT_OF_RANGE = 2,
  /** A plan, file or name does not exist. */
  FSDPRT_NOT_FOUND = 3,
  /** A plan or peer speaks a version this runtime does not support. */
  FSDPRT_INCOMPATIBLE = 4,
  /** Reading or writing a file failed. */
  FSDPRT_IO_ERROR = 5,
  /** Memory or another resource ran out. */
  FSDPRT_RESOURCE_EXHAUSTED = 6,
  /** A collective peer failed or timed out. */
  FSDPRT_UNAVAILABLE = 7,
  /** A bug in the runtime. */
  FSDPRT_INTERNAL = 8,
  /** Another rank failed; this rank learned it in a collective every rank
   *  joined, and that rank's own status says why. A launcher can leave the
   *  ending of the job to that rank. */
  FSDPRT_PEER_FAILED = 9
} fsdprt_status_code_t;

/** A failure: NULL means success. Owned by the caller; release it with
 *  fsdprt_status_free. */
typedef struct fsdprt_status_s *fsdprt_status_t;

/** The status's code; FSDPRT_OK for NULL. */
FSDPRT_API fsdprt_status_code_t fsdprt_status_code(fsdprt_status_t status);

/** The status's message, valid until the status is freed; "" for NULL. */
FSDPRT_API const char *fsdprt_status_message(fsdprt_status_t status);

/** A short name for a code, e.g. "INVALID_ARGUMENT"; static storage. */
FSDPRT_API const char *fsdprt_status_code_name(fsdprt_status_code_t code);

/** Nonzero when every rank of the session fails this same call, having
 *  learned of the failure in a collective they all completed (checkpoint
 *  saves and loads agree this way): no rank is left waiting on another, so
 *  a launcher can end each rank normally (MPI_Finalize, a non-zero exit)
 *  rather than abort the job. FSDPRT_PEER_FAILED statuses always are;
 *  0 for NULL. */
FSDPRT_API int fsdprt_status_agreed(fsdprt_status_t status);

/** Releases a status. NULL is accepted and ignored. */
FSDPRT_API void fsdprt_status_free(fsdprt_status_t status);

/*===----------------------------------------------------------------------===*
 * Flat-parameter layout
 *
 * How one FSDP unit's parameters are packed into a flat buffer and sharded:
 * parameters concatenated in order (each start aligned to `alignment`
 * elements), zero-padded at the end to a multiple of the world size, rank r
 * owning elements [r * shard_numel, (r + 1) * shard_numel). This is PyTorch
 * FSDP's FlatParameter layout; hosts use it to find a rank's bytes.
 *===----------------------------------------------------------------------===*/

/** An immutable flat-parameter layout. */
typedef struct fsdprt_layout_s fsdprt_layout_t;

/** The part of one parameter held by one rank: elements
 *  [param_begin, param_end) of the flattened parameter sit at
 *  [shard_begin, shard_end) of the rank's local shard. */
typedef struct fsdprt_param_shard_s {
  int64_t param_index;
  int64_t param_begin;
  int64_t param_end;
  int64_t shard_begin;
  int64_t shard_end;
} fsdprt_param_shard_t;

/** Creates the layout of `num_params` parameters whose element counts are
 *  `numels`, for `world_size` ranks; `alignment` is in elements (1 = none).
 *  On success writes a new handle to `*out_layout`. */
FSDPRT_API fsdprt_status_t fsdprt_layout_create(const int64_t *numels,
                                                size_t num_params,
                                                int64_t world_size,
                                                int64_t alignment,
                                                fsdprt_layout_t **out_layout);

/** Releases a layout. NULL is accepted and ignored. */
FSDPRT_API void fsdprt_layout_destroy(fsdprt_layout_t *layout);

/** Total elements of the flat buffer, padding included (0 for NULL). */
FSDPRT_API int64_t fsdprt_layout_padded_numel(const fsdprt_layout_t *layout);

/** Elements in each rank's shard (0 for NULL). */
FSDPRT_API int64_t fsdprt_layout_shard_numel(const fsdprt_layout_t *layout);

/** Writes where parameter `index` lies in the unsharded flat buffer. */
FSDPRT_API fsdprt_status_t
fsdprt_layout_param_range(const fsdprt_layout_t *layout, int64_t index,
                          int64_t *out_begin, int64_t *out_end);

/** Writes the flat-buffer range owned by `rank` and how many of its elements
 *  are end padding. `out_padding` may be NULL. */
FSDPRT_API fsdprt_status_t fsdprt_layout_shard_range(
    const fsdprt_layout_t *layout, int64_t rank, int64_t *out_begin,
    int64_t *out_end, int64_t *out_padding);

/** Writes the parameters intersecting `rank`'s shard, in flat order, into
 *  `out_shards` (room for `capacity` entries) and their number into
 *  `*out_count`. With `out_shards` NULL it only counts; a `capacity` smaller
 *  than the count fails with FSDPRT_OUT_OF_RANGE and writes nothing. */
FSDPRT_API fsdprt_status_t fsdprt_layout_param_shards(
    const fsdprt_layout_t *layout, int64_t rank,
    fsdprt_param_shard_t *out_shards, size_t capacity, size_t *out_count);

/*===----------------------------------------------------------------------===*
 * Plans
 *
 * A plan (`.plan`, FlatBuffers, schema runtime/schema/plan.fbs) is what the
 * compiler writes and the runtime executes. Loading verifies it completely
 * before anything reads it and refuses a schema version this runtime does
 * not support.
 *===----------------------------------------------------------------------===*/

/** The plan schema version this runtime reads and this header's compiler
 *  writes. */
#define FSDPRT_PLAN_SCHEMA_VERSION 2

/** A loaded, verified plan. */
typedef struct fsdprt_plan_s fsdprt_plan_t;

/** Element types of plan tensors (the values of plan.fbs's DType). */
typedef enum fsdprt_dtype_e {
  FSDPRT_F32 = 0,
  FSDPRT_F16 = 1,
  FSDPRT_BF16 = 2,
  FSDPRT_F64 = 3,
  FSDPRT_I64 = 4,
  FSDPRT_I32 = 5,
  FSDPRT_I16 = 6,
  FSDPRT_I8 = 7,
  FSDPRT_U8 = 8,
  FSDPRT_BOOL = 9
} fsdprt_dtype_t;

/** A declared plan input or output. Pointers stay valid while the plan
 *  lives. */
typedef struct fsdprt_tensor_desc_s {
  const char *name;
  fsdprt_dtype_t dtype;
  size_t rank;
  const int64_t *shape;
} fsdprt_tensor_desc_t;

/** Where a parameter's (or buffer's) initial bytes are: `file` relative to
 *  the plan's model directory, and a byte range. */
typedef struct fsdprt_weight_ref_s {
  const char *fqn;
  int is_buffer;
  const char *file;
  uint64_t offset;
  uint64_t length;
} fsdprt_weight_ref_t;

/** Loads and verifies the plan file at `path`. Fails with FSDPRT_NOT_FOUND
 *  or FSDPRT_IO_ERROR if it cannot be read, FSDPRT_INVALID_ARGUMENT if it is
 *  not a well-formed plan, FSDPRT_INCOMPATIBLE if its schema version is not
 *  FSDPRT_PLAN_SCHEMA_VERSION (the message names both versions). */
FSDPRT_API fsdprt_status_t fsdprt_plan_load_file(const char *path,
                                                 fsdprt_plan_t **out_plan);

/** As fsdprt_plan_load_file, from `size` bytes at `data` (copied). */
FSDPRT_API fsdprt_status_t fsdprt_plan_load_memory(const void *data,
                                                   size_t size,
                                                   fsdprt_plan_t **out_plan);

/** Releases a plan. NULL is accepted and ignored. */
FSDPRT_API void fsdprt_plan_destroy(fsdprt_plan_t *plan);

/** The plan's schema version (0 for NULL). */
FSDPRT_API uint32_t fsdprt_plan_schema_version(const fsdprt_plan_t *plan);

/** Numbers of declared inputs, outputs and weight references (0 for NULL). */
FSDPRT_API size_t fsdprt_plan_num_inputs(const fsdprt_plan_t *plan);
FSDPRT_API size_t fsdprt_plan_num_outputs(const fsdprt_plan_t *plan);
FSDPRT_API size_t fsdprt_plan_num_weights(const fsdprt_plan_t *plan);

/** Describes input / output / weight reference `index`. */
FSDPRT_API fsdprt_status_t fsdprt_plan_input(const fsdprt_plan_t *plan,
                                             size_t index,
                                             fsdprt_tensor_desc_t *out_desc);
FSDPRT_API fsdprt_status_t fsdprt_plan_output(const fsdprt_plan_t *plan,
                                              size_t index,
                                              fsdprt_tensor_desc_t *out_desc);
FSDPRT_API fsdprt_status_t fsdprt_plan_weight(const fsdprt_plan_t *plan,
                                              size_t index,
                                              fsdprt_weight_ref_t *out_ref);
/** Weight `index` as a tensor: its FQN as the name, dtype and shape. An
 *  empty `file` in its reference means it starts as zeros. */
FSDPRT_API fsdprt_status_t fsdprt_plan_weight_desc(
    const fsdprt_plan_t *plan, size_t index, fsdprt_tensor_desc_t *out_desc);

/** Sharded plans. A plan runs on `world_size` ranks laid out row-major over
 *  its mesh (no mesh: one rank); each FSDP unit's flat parameter is stored
 *  once, and each rank holds its shard of it. */
FSDPRT_API int64_t fsdprt_plan_world_size(const fsdprt_plan_t *plan);
/** The number of mesh axes (0: one rank, no mesh) and the size of one. */
FSDPRT_API size_t fsdprt_plan_mesh_rank(const fsdprt_plan_t *plan);
FSDPRT_API int64_t fsdprt_plan_mesh_dim(const fsdprt_plan_t *plan, size_t axis);
/** Bytes a session of the plan allocates on each rank (all arenas). */
FSDPRT_API uint64_t fsdprt_plan_peak_bytes(const fsdprt_plan_t *plan);

/** One FSDP unit of a plan. Pointers stay valid while the plan lives. */
typedef struct fsdprt_unit_desc_s {
  const char *name;
  const char *module; /* the wrapped module's FQN ("" for the root) */
  size_t num_params;  /* member parameters */
  fsdprt_dtype_t dtype;
  int64_t padded_numel; /* the flat buffer, padding included */
  int64_t group_size;   /* ranks its flat buffer is sharded over */
  int64_t shard_numel;  /* elements each of them holds */
} fsdprt_unit_desc_t;

FSDPRT_API size_t fsdprt_plan_num_units(const fsdprt_plan_t *plan);
FSDPRT_API fsdprt_status_t fsdprt_plan_unit(const fsdprt_plan_t *plan,
                                            size_t index,
                                            fsdprt_unit_desc_t *out_desc);

/** Member `index` of unit `unit`, in flat order: its FQN as the name, its
 *  dtype and shape. */
FSDPRT_API fsdprt_status_t
fsdprt_plan_unit_param(const fsdprt_plan_t *plan, size_t unit, size_t index,
                       fsdprt_tensor_desc_t *out_desc);

/** The other FQNs of parameter `fqn` (tied weights, stored once under
 *  their first name): how many, and alias `index` (NULL when out of
 *  range). A torch state dict holds the tensor under every name. */
FSDPRT_API size_t fsdprt_plan_num_aliases(const fsdprt_plan_t *plan,
                                          const char *fqn);
FSDPRT_API const char *fsdprt_plan_alias(const fsdprt_plan_t *plan,
                                         const char *fqn, size_t index);

/** One kernel of a plan: its runtime op ("all_gather", "reduce_scatter"
 *  and "all_reduce" are the collectives), its origin, its stream (0
 *  computes, 1 communicates) and how many kernels of the other stream it
 *  waits for. */
typedef struct fsdprt_kernel_desc_s {
  const char *op;
  const char *location;
  int stream;
  size_t num_deps;
} fsdprt_kernel_desc_t;

FSDPRT_API size_t fsdprt_plan_num_kernels(const fsdprt_plan_t *plan);
FSDPRT_API fsdprt_status_t fsdprt_plan_kernel(const fsdprt_plan_t *plan,
                                              size_t index,
                                              fsdprt_kernel_desc_t *out_desc);

/*===----------------------------------------------------------------------===*
 * Sessions
 *
 * A session executes one plan on one rank: it allocates the plan's arenas
 * once, loads parameters and buffers from the model's data files by the
 * plan's weight map, and runs the plan's kernels. The plan must outlive the
 * session. A session is used by one thread at a time.
 *===----------------------------------------------------------------------===*/

/** An executable instance of a plan. */
typedef struct fsdprt_session_s fsdprt_session_t;

/** Creates a session for `plan` on the CPU backend: allocates its arenas,
 *  fills its constants and checks every buffer, declared tensor, weight
 *  reference and kernel against each other (an inconsistency fails with
 *  FSDPRT_INVALID_ARGUMENT; for a kernel the message names its op and ONNX
 *  node; memory running out is FSDPRT_RESOURCE_EXHAUSTED).
 *  `model_dir` is where the weight map's files are (NULL: the plan's
 *  model_dir). `num_threads` bounds the threads kernels use (0: one per
 *  core; more than FSDPRT_MAX_THREADS is FSDPRT_INVALID_ARGUMENT). Weights
 *  are not read yet: see fsdprt_session_load_weights. */
FSDPRT_API fsdprt_status_t
fsdprt_session_create(const fsdprt_plan_t *plan, const char *model_dir,
                      int num_threads, fsdprt_session_t **out_session);

/** The most kernel threads a session takes: more would only exhaust the
 *  host's threads (OpenMP cannot start them). */
#define FSDPRT_MAX_THREADS 1024

/** How a multi-rank session communicates. */
typedef struct fsdprt_mpi_options_s {
  /** Nonzero: MPI_COMM_WORLD; zero: `comm`. */
  int use_world;
  /** The host's communicator as an MPI_Fint (MPI_Comm_c2f(comm)): an
   *  MPI_Comm is a pointer in Open MPI and an int in MPICH, an MPI_Fint is
   *  an int in both. The session duplicates it. */
  int comm;
  /** The deadline of every collective, in seconds (0: none). A collective
   *  past it fails the run with FSDPRT_UNAVAILABLE naming the operation and
   *  the rank, instead of hanging on a dead or stalled peer. */
  double timeout_seconds;
} fsdprt_mpi_options_t;

/** As fsdprt_session_create, for one rank of a sharded plan: the
 *  communicator (MPI must be initialized by the host) must have the plan's
 *  world size; this rank's index in it is its mesh position (row-major).
 *  Collective: every rank of the communicator calls it. `options` NULL:
 *  MPI_COMM_WORLD and a 300 s deadline. Loading weights then reads only
 *  this rank's shard of each unit. */
FSDPRT_API fsdprt_status_t fsdprt_session_create_mpi(
    const fsdprt_plan_t *plan, const char *model_dir, int num_threads,
    const fsdprt_mpi_options_t *options, fsdprt_session_t **out_session);

/** Everything a session can be created with. Initialise it with
 *  fsdprt_session_options_init and set what differs: later versions add
 *  fields at the end, and `struct_size` tells the library which fields the
 *  host knows. */
/** A local group: the ranks of one process, one session per thread, whose
 *  collectives meet in host memory. It runs a sharded plan's N ranks
 *  inside one process: on one GPU (where NCCL refuses two ranks per
 *  device) or, in tests, on the CPU or the fake device. Each of the
 *  group's sessions names it and its rank (fsdprt_session_options_t), and
 *  they must run their steps at the same time, on their own threads. */
typedef struct fsdprt_local_group_s fsdprt_local_group_t;

/** A group of `world_size` ranks (1 to 4096) whose collectives wait at most
 *  `timeout_seconds` (0: no deadline) for the other ranks; past it the
 *  collective fails with FSDPRT_UNAVAILABLE naming it, and so does every
 *  later one of the group. Destroy it after its sessions. */
FSDPRT_API fsdprt_status_t fsdprt_local_group_create(
    int world_size, double timeout_seconds, fsdprt_local_group_t **out_group);
/** Fails every collective the group's sessions wait in, or will start,
 *  with `reason`: a rank calls it when its own session failed, so that the
 *  others stop instead of waiting for it. NULL arguments are ignored. */
FSDPRT_API void fsdprt_local_group_abort(fsdprt_local_group_t *group,
                                         const char *reason);
FSDPRT_API void fsdprt_local_group_destroy(fsdprt_local_group_t *group);

typedef struct fsdprt_session_options_s {
  /** sizeof(fsdprt_session_options_t) as the host was compiled. */
  size_t struct_size;
  /** Where the weight map's files are (NULL: the plan's model_dir). */
  const char *model_dir;
  /** Threads kernels use (0: one per core; at most FSDPRT_MAX_THREADS). */
  int num_threads;
  /** The most bytes the session may allocate on this rank (0: no limit).
   *  A plan whose peak (fsdprt_plan_peak_bytes: every arena, shards,
   *  gathered parameters, activations, gradients, optimizer state) does
   *  not fit is refused with FSDPRT_RESOURCE_EXHAUSTED naming the peak, its
   *  parts and the budget, before anything is allocated. */
  uint64_t memory_budget_bytes;
  /** NULL: one rank (fsdprt_session_create); otherwise the communicator
   *  and deadline of a multi-rank session (fsdprt_session_create_mpi). */
  const fsdprt_mpi_options_t *mpi;
  /** The device the kernels run on: "cpu" (NULL or "" too: the default),
   *  or "cuda" / "cuda:N" (GPU N) where this library has a CUDA backend;
   *  for tests, "fake-cuda", "fake-cuda:strict" and "fake-cuda:cudnn"
   *  (docs/gpu.md).
   *  Anything else, or a device this build cannot run on, is refused with
   *  FSDPRT_INVALID_ARGUMENT naming it. (Hosts compiled before this field
   *  existed pass a smaller struct_size: their device is "cpu".) */
  const char *device;
  /** Non-NULL: this session is rank `local_rank` of a local group (above)
   *  of the plan's world size; `mpi` must then be NULL. */
  fsdprt_local_group_t *local_group;
  int local_rank;
  /** Non-NULL: this session is rank `nccl_rank` of `nccl_world_size`
   *  processes on GPUs that meet over NCCL without MPI, device "cuda" or
   *  "cuda:N". NCCL's unique id goes through this store:
   *    "file:PATH"  rank 0 writes it to PATH (atomically); the other ranks
   *                 wait for the file, up to `nccl_timeout_seconds`;
   *    "env:NAME"   every rank reads it from environment variable NAME,
   *                 256 hex digits that the launcher made (NCCL's
   *                 ncclGetUniqueId, as hex).
   *  `nccl_timeout_seconds` is also every collective's deadline (0: none):
   *  past it a watchdog aborts the communicator and the run fails with
   *  FSDPRT_UNAVAILABLE naming the collective. With MPI
   *  (fsdprt_session_create_mpi) on a GPU, NCCL is used the same way and
   *  its id goes through MPI; leave this NULL. */
  const char *nccl_id_store;
  int nccl_rank;
  int nccl_world_size;
  double nccl_timeout_seconds;
  /** Nonzero: no graphs. By default a single-rank session on device cuda
   *  (or fake-cuda) runs its first step directly, captures the second into
   *  a CUDA graph and replays that graph from then on (the arenas never
   *  move, so the same launches do the same work). */
  int disable_graphs;
  /** The seed of the session's random kernels (training-mode Dropout):
   *  their draws are Philox-4x32-10 of (seed; step, op, element), where the
   *  step counts the runs the session has completed (or starts from a
   *  loaded sharded checkpoint's step) and elements are
   *  numbered over the global batch, so the same seed gives the same masks
   *  at any thread count and any world size (docs/training.md,
   *  "Randomness"). Default 0. */
  uint64_t seed;
} fsdprt_session_options_t;

/** Fills `options` with the defaults: the plan's model_dir, one thread per
 *  core, no memory budget, one rank, and struct_size. It writes this
 *  header's whole fsdprt_session_options_t: a host built against an older
 *  header (a smaller struct) or binding the struct itself (ctypes) calls it
 *  on room enough, or sets struct_size and its fields without it. NULL is
 *  ignored. */
FSDPRT_API void fsdprt_session_options_init(fsdprt_session_options_t *options);

/** Creates a session as fsdprt_session_create (or, with `options->mpi`,
 *  fsdprt_session_create_mpi: collective) does, with the options above.
 *  `options` NULL means the defaults. A `struct_size` smaller than the
 *  first version's, or larger than this library's, is refused. */
FSDPRT_API fsdprt_status_t fsdprt_session_create_with_options(
    const fsdprt_plan_t *plan, const fsdprt_session_options_t *options,
    fsdprt_session_t **out_session);

/** For hosts that do not use MPI themselves (the Python frontend): starts
 *  MPI if it is not running yet (MPI_Init_thread, funneled) and writes
 *  this process's rank and the world's size; under mpirun that is the
 *  job's, alone a singleton world of 1. fsdprt_mpi_finalize ends it
 *  (only if this library started it). Either pointer may be NULL. */
FSDPRT_API fsdprt_status_t fsdprt_mpi_init(int *out_rank, int *out_size);
FSDPRT_API void fsdprt_mpi_finalize(void);

/** Collective: `*value` becomes its mean over the session's ranks (the
 *  global batch's loss from each rank's). One-rank sessions leave it. */
FSDPRT_API fsdprt_status_t
fsdprt_session_mean_over_ranks(const fsdprt_session_t *session, double *value);

/** The session's rank and world size (one-rank sessions: 0 and 1). */
FSDPRT_API int fsdprt_session_rank(const fsdprt_session_t *session);
FSDPRT_API int fsdprt_session_world_size(const fsdprt_session_t *session);

/** Releases a session. NULL is accepted and ignored. */
FSDPRT_API void fsdprt_session_destroy(fsdprt_session_t *session);

/** Reads every parameter and buffer from its file into the session's
 *  weights arena. Fails with FSDPRT_NOT_FOUND / FSDPRT_IO_ERROR naming the
 *  file and the FQN when a file is missing or shorter than the map says. */
FSDPRT_API fsdprt_status_t
fsdprt_session_load_weights(fsdprt_session_t *session);

/** Copies `bytes` bytes at `data` into the input named `name`. `bytes` must
 *  equal the input's size (numel times element size) exactly. The input
 *  keeps the value for every later run until set again. */
FSDPRT_API fsdprt_status_t fsdprt_session_set_input(fsdprt_session_t *session,
                                                    const char *name,
                                                    const void *data,
                                                    size_t bytes);

/** Runs the plan once (a forward pass, or a training step). Fails with
 *  FSDPRT_INVALID_ARGUMENT if weights were not loaded or an input was
 *  never set (an input keeps its value from run to run); a kernel's run-time
 *  fault (an index out of range) fails with FSDPRT_OUT_OF_RANGE and a
 *  message naming the kernel. A training step's plan lists state updates:
 *  after the last kernel the run writes them over the parameters, buffers
 *  and optimizer state, so the next run starts from the new values
 *  (fsdprt_session_load_weights resets them). */
FSDPRT_API fsdprt_status_t fsdprt_session_run(fsdprt_session_t *session);

/** Copies the current value of the parameter or buffer named `fqn` (its
 *  PyTorch name, or an optimizer state's `optim.<state>.<fqn>`) into
 *  `data`, which has room for exactly its `bytes`: a state dict entry.
 *  FSDPRT_NOT_FOUND if the plan has no such state. */
FSDPRT_API fsdprt_status_t fsdprt_session_read_state(
    const fsdprt_session_t *session, const char *fqn, void *data, size_t bytes);

/** As fsdprt_session_read_state, but a member of a unit sharded over
 *  several ranks is gathered whole from its group's shards: collective,
 *  every rank of the unit's group calls it with the same `fqn`. State that
 *  is not sharded is read locally. */
FSDPRT_API fsdprt_status_t fsdprt_session_read_full_state(
    const fsdprt_session_t *session, const char *fqn, void *data, size_t bytes);

/** Copies the output named `name` into `data`, which has room for `bytes`
 *  bytes; `bytes` must equal the output's size exactly. Outputs are
 *  defined after a successful run: before the first run and after a failed
 *  one, FSDPRT_INVALID_ARGUMENT says so. */
FSDPRT_API fsdprt_status_t
fsdprt_session_get_output(const fsdprt_session_t *session, const char *name,
                          void *data, size_t bytes);

/*===----------------------------------------------------------------------===*
 * Checkpoints
 *
 * Written to a temporary name and renamed, so an interrupted save leaves
 * the last good checkpoint; a torn or mismatched one is refused on load
 * with a message naming the file and the tensor. Multi-rank sessions call
 * these collectively (every rank).
 *===----------------------------------------------------------------------===*/

/** A model state dict: every parameter (flat units' members gathered
 *  whole) and model buffer by its PyTorch FQN, in one .safetensors file at
 *  `path`, written by rank 0, with each tensor's CRC-32 in its metadata.
 *  Optimizer state is not in it. Refused if `path` exists and is not a full
 *  checkpoint the runtime wrote. */
FSDPRT_API fsdprt_status_t fsdprt_session_save_full_checkpoint(
    fsdprt_session_t *session, const char *path);

/** Loads a full checkpoint (instead of the plan's weight files): each rank
 *  reads only its shard of every unit, at any world size; rank 0 checks the
 *  recorded checksums; every tensor's dtype and shape must be the plan's.
 *  Optimizer state starts from zero. */
FSDPRT_API fsdprt_status_t fsdprt_session_load_full_checkpoint(
    fsdprt_session_t *session, const char *path);

/** A training checkpoint in directory `dir`: each rank writes what it holds
 *  (unit shards, optimizer state, buffers) to rank-<r>.safetensors (with its
 *  rank, the world size, `step`, its shard of each unit and each tensor's
 *  CRC-32 in the metadata) in `dir`.tmp, then rank 0 writes index.json
 *  (world size, mesh, `step`, each unit's layout and holders) and swaps the
 *  directory in, the previous one kept as `dir`.old until the new one is in
 *  place. Refused if `dir` (or `dir`.tmp, `dir`.old) holds anything a save
 *  did not write (see fsdprt_checkpoint_check_destination); `step` must be
 *  from 0 to 2^63-2. */
FSDPRT_API fsdprt_status_t fsdprt_session_save_sharded_checkpoint(
    fsdprt_session_t *session, const char *dir, int64_t step);

/** Loads a sharded checkpoint written at any world size: each rank reads
 *  the pieces of the old shards its own shard covers (resharding) and its
 *  optimizer state the same way; other state from the same rank's file (or
 *  rank 0's). `*step` (may be NULL) gets the saved step, and the session's
 *  step (which keys Dropout's masks) becomes it. Where `dir` has no
 *  index.json (a save interrupted between its renames), the finished
 *  `dir`.tmp, else `dir`.old, is loaded; with neither it is refused. Every
 *  rank file's rank, world size, step and shards must agree with its name
 *  and the index, every tensor's dtype, shape and checksum with the plan
 *  and the file; a failure on any rank fails every rank. */
FSDPRT_API fsdprt_status_t fsdprt_session_load_sharded_checkpoint(
    fsdprt_session_t *session, const char *dir, int64_t *step);

/** Whether a checkpoint may be saved at `path` without replacing anything
 *  the runtime did not write: a full checkpoint (`sharded` 0) at an absent
 *  path or over a full checkpoint the runtime wrote; a sharded one (`sharded`
 *  1) at an absent path or over a directory holding only a checkpoint's
 *  files (and the same for `path`.tmp and `path`.old). The directory that
 *  will hold it must be writable (for a sharded one, missing directories
 *  above it are created, and the nearest existing one must be writable).
 *  A sharded path may end in '/', a full one not. The save functions check
 *  the same; a host calls this before a long run to fail early. Needs no
 *  session. */
FSDPRT_API fsdprt_status_t
fsdprt_checkpoint_check_destination(const char *path, int sharded);

/** The last run's time in compute kernels and in collectives (on the CPU
 *  runtime collectives run in turn with compute, so the second is the
 *  communication the step waited for, peers included). Any pointer may be
 *  NULL. */
FSDPRT_API fsdprt_status_t
fsdprt_session_timings(const fsdprt_session_t *session, double *compute_seconds,
                       double *communication_seconds);

/** How the last run's collectives overlapped its compute: the seconds its
 *  collectives took, each from its start to its completion (seen by
 *  polling the started ones after every compute kernel, or at its wait),
 *  and the seconds the run waited for them (exposed: what
 *  fsdprt_session_timings calls communication). Exposed over the run's
 *  time is the fraction of the step communication cost. Any pointer may
 *  be NULL. */
FSDPRT_API fsdprt_status_t
fsdprt_session_overlap(const fsdprt_session_t *session,
                       double *communication_seconds, double *exposed_seconds);

/** Memory the session holds, in bytes: its activations arena (the plan's
 *  peak activation memory), weights and constants. Any pointer may be NULL. */
FSDPRT_API fsdprt_status_t fsdprt_session_memory(
    const fsdprt_session_t *session, uint64_t *out_activation_bytes,
    uint64_t *out_weight_bytes, uint64_t *out_constant_bytes);

/** Bytes of the kernel scratch workspace the session allocated beside the
 *  plan's arenas (attention tiles, convolution column buffers: sized by the
 *  kernels when the session is created, not part of the plan's peak_bytes;
 *  the memory budget of fsdprt_session_create_with_options counts it). */
FSDPRT_API fsdprt_status_t
fsdprt_session_workspace_bytes(const fsdprt_session_t *session,
                               uint64_t *out_bytes);

/** The size in bytes of one element of `dtype` (0 for an unknown value). */
FSDPRT_API size_t fsdprt_dtype_size(fsdprt_dtype_t dtype);

/** The name of `dtype` as NumPy spells it ("float32", "int64", "bool", ...;
 *  "unknown" for an unknown value); static storage. */
FSDPRT_API const char *fsdprt_dtype_name(fsdprt_dtype_t dtype);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDPRT_FSDPRT_H */
