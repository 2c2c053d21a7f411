//===- train.cpp - A training host with its own loop over the fsdprt C API ===//
//
// Trains a plan compiled for N ranks (fsdp-autodiff + fsdp-optimizer +
// fsdp-shard): the host owns the loop, the data, the learning-rate
// schedule and the checkpoints; the runtime runs each sharded step.
//
//   mpirun -np 2 train model.plan --data input_ids=ids.npy --data labels=y.npy
//          --steps 100 [--lr 1e-3] [--warmup 10] [--min-lr 1e-4]
//          [--total-steps T] [--checkpoint-dir DIR --checkpoint-every K]
//          [--resume DIR/step-K] [--model-dir DIR]
//
// Data: each --data file holds batches one after another: its first
// dimension is a multiple of the global batch (N ranks times the plan's
// batch). Step k takes global batch (k-1) modulo their number, and rank r
// takes the r-th slice of it.
// Learning rate: linear warmup from lr/warmup to lr over `warmup` steps,
// then cosine decay to min-lr at total-steps (defaults: no warmup,
// min-lr = lr: constant).
// Checkpoints: every K steps a sharded checkpoint DIR/step-<k> (each rank
// writes its shards and optimizer state; atomic). --resume loads one,
// written at any world size, and runs --steps more steps numbered on from
// the saved one (same data batches and learning rates as an uninterrupted
// run).
// Rank 0 prints "step <k> loss <loss> lr <lr>", the loss averaged over the
// global batch. Any error prints "train: error: ..." and ends every rank.
//
//===----------------------------------------------------------------------===//

#include "npy.h"

#include <fsdprt/fsdprt.h>
// Only MPI's C API: the deprecated C++ bindings do not compile cleanly.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

/// A failure every rank returns from the same call (fsdprt_status_agreed,
/// e.g. a torn checkpoint): no rank waits on another, so each ends normally.
struct Agreed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws the status's message (and frees it) if the call failed.
void check(fsdprt_status_t status, const std::string &what) {
  if (!status)
    return;
  std::string message = what + ": " + fsdprt_status_message(status) + " (" +
                        fsdprt_status_code_name(fsdprt_status_code(status)) +
                        ")";
  bool agreed = fsdprt_status_agreed(status);
  fsdprt_status_free(status);
  if (agreed)
    throw Agreed(message);
  throw std::runtime_error(message);
}

/// Owning handles: destroyed however the loop ends.
using Plan = std::unique_ptr<fsdprt_plan_t, decltype(&fsdprt_plan_destroy)>;
using Session =
    std::unique_ptr<fsdprt_session_t, decltype(&fsdprt_session_destroy)>;

struct Options {
  std::string plan, modelDir, checkpointDir, resume;
  std::map<std::string, std::string> data;
  int64_t steps = 0, warmup = 0, totalSteps = 0, checkpointEvery = 0;
  double lr = 1e-3, minLr = -1;
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::runtime_error(flag + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> double {
      std::string text = value();
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(text, &used);
      } catch (const std::logic_error &) {
      }
      if (used == 0 || used != text.size())
        throw std::runtime_error(flag + " needs a number, not '" + text + "'");
      return v;
    };
    if (flag == "--data") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos)
        throw std::runtime_error("--data needs NAME=FILE.npy, not '" + v + "'");
      o.data[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (flag == "--steps") {
      o.steps = static_cast<int64_t>(number());
    } else if (flag == "--lr") {
      o.lr = number();
    } else if (flag == "--min-lr") {
      o.minLr = number();
    } else if (flag == "--warmup") {
      o.warmup = static_cast<int64_t>(number());
    } else if (flag == "--total-steps") {
      o.totalSteps = static_cast<int64_t>(number());
    } else if (flag == "--checkpoint-dir") {
      o.checkpointDir = value();
    } else if (flag == "--checkpoint-every") {
      o.checkpointEvery = static_cast<int64_t>(number());
    } else if (flag == "--resume") {
      o.resume = value();
    } else if (flag == "--model-dir") {
      o.modelDir = value();
    } else if (flag[0] != '-' && o.plan.empty()) {
      o.plan = flag;
    } else {
      throw std::runtime_error("unknown argument '" + flag + "'");
    }
  }
  if (o.plan.empty() || o.steps <= 0)
    throw std::runtime_error("usage: train PLAN --data NAME=FILE.npy ... "
                             "--steps K [options; see train.cpp]");
  if (o.checkpointEvery > 0 && o.checkpointDir.empty())
    throw std::runtime_error("--checkpoint-every needs --checkpoint-dir");
  if (o.minLr < 0)
    o.minLr = o.lr;
  return o;
}

/// Warmup, then cosine decay to minLr at totalSteps.
double learningRate(const Options &o, int64_t step) {
  if (step <= o.warmup)
    return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup);
  double span =
      static_cast<double>(std::max<int64_t>(o.totalSteps - o.warmup, 1));
  double progress = std::min(1.0, static_cast<double>(step - o.warmup) / span);
  return o.minLr + 0.5 * (o.lr - o.minLr) * (1 + std::cos(M_PI * progress));
}

/// Sets the scalar input `name` (lr, step) in whatever dtype the plan
/// declares it.
void setScalar(fsdprt_session_t *session, const fsdprt_tensor_desc_t &desc,
               double value) {
  if (desc.rank != 0)
    throw std::runtime_error(std::string("input '") + desc.name +
                             "' is not a scalar");
  unsigned char bytes[8];
  float f = static_cast<float>(value);
  double d = value;
  int64_t i64 = static_cast<int64_t>(value);
  switch (desc.dtype) {
  case FSDPRT_F32:
    std::memcpy(bytes, &f, 4);
    break;
  case FSDPRT_F64:
    std::memcpy(bytes, &d, 8);
    break;
  case FSDPRT_I64:
    std::memcpy(bytes, &i64, 8);
    break;
  default:
    throw std::runtime_error(std::string("input '") + desc.name + "' is " +
                             fsdprt_dtype_name(desc.dtype));
  }
  check(fsdprt_session_set_input(session, desc.name, bytes,
                                 fsdprt_dtype_size(desc.dtype)),
        desc.name);
}

/// A .npy file's contents, freed when it goes out of scope.
class NpyArray {
public:
  explicit NpyArray(const std::string &path) {
    char error[512];
    if (npy_read(path.c_str(), &array, error, sizeof error))
      throw std::runtime_error(error);
  }
  NpyArray(NpyArray &&other) noexcept : array(other.array) {
    other.array.data = nullptr;
  }
  NpyArray(const NpyArray &) = delete;
  NpyArray &operator=(const NpyArray &) = delete;
  NpyArray &operator=(NpyArray &&) = delete;
  ~NpyArray() { npy_free(&array); }

  const npy_array_t &operator*() const { return array; }
  const char *bytes() const { return static_cast<const char *>(array.data); }

private:
  npy_array_t array;
};

/// A data input: the whole file, and how many global batches it holds.
struct DataInput {
  fsdprt_tensor_desc_t desc;
  NpyArray file;
  size_t batches;
};

void run(int argc, char **argv, int rank, int world) {
  Options o = parse(argc, argv);
  if (o.totalSteps <= 0)
    o.totalSteps = o.steps;

  fsdprt_plan_t *rawPlan = nullptr;
  check(fsdprt_plan_load_file(o.plan.c_str(), &rawPlan),
        "cannot load the plan");
  Plan plan(rawPlan, fsdprt_plan_destroy);
  if (fsdprt_plan_world_size(plan.get()) != world)
    throw std::runtime_error(
        o.plan + " is for " +
        std::to_string(fsdprt_plan_world_size(plan.get())) +
        " ranks; the job has " + std::to_string(world));

  // The host's communicator: here MPI_COMM_WORLD, passed as an MPI_Fint.
  fsdprt_mpi_options_t mpi = {0, static_cast<int>(MPI_Comm_c2f(MPI_COMM_WORLD)),
                              120.0};
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.model_dir = o.modelDir.empty() ? nullptr : o.modelDir.c_str();
  options.mpi = &mpi;
  fsdprt_session_t *rawSession = nullptr;
  check(fsdprt_session_create_with_options(plan.get(), &options, &rawSession),
        "cannot create the session");
  Session session(rawSession, fsdprt_session_destroy);

  // Inputs: data from files, lr and step from the loop.
  std::vector<DataInput> data;
  std::vector<fsdprt_tensor_desc_t> inputs(fsdprt_plan_num_inputs(plan.get()));
  const fsdprt_tensor_desc_t *lrInput = nullptr, *stepInput = nullptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check(fsdprt_plan_input(plan.get(), i, &inputs[i]), "plan input");
    const fsdprt_tensor_desc_t &desc = inputs[i];
    if (std::strcmp(desc.name, "lr") == 0) {
      lrInput = &desc;
      continue;
    }
    if (std::strcmp(desc.name, "step") == 0) {
      stepInput = &desc;
      continue;
    }
    auto file = o.data.find(desc.name);
    if (file == o.data.end())
      throw std::runtime_error(std::string("no --data ") + desc.name +
                               "=FILE.npy given for the plan's input '" +
                               desc.name + "'");
    NpyArray array(file->second);
    char error[512];
    size_t batches = npy_global_batches(&*array, file->second.c_str(), &desc,
                                        world, error, sizeof error);
    if (batches == 0)
      throw std::runtime_error(std::string("input '") + desc.name +
                               "': " + error);
    data.push_back({desc, std::move(array), batches});
  }
  for (const auto &[name, file] : o.data)
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const auto &d) { return name == d.name; }))
      throw std::runtime_error("the plan has no input '" + name + "' (--data " +
                               name + "=" + file + ")");
  if (!lrInput)
    throw std::runtime_error(o.plan +
                             " has no input 'lr': is it a training plan?");
  std::vector<fsdprt_tensor_desc_t> outputs(
      fsdprt_plan_num_outputs(plan.get()));
  for (size_t i = 0; i < outputs.size(); ++i)
    check(fsdprt_plan_output(plan.get(), i, &outputs[i]), "plan output");
  if (std::none_of(outputs.begin(), outputs.end(), [](const auto &d) {
        return std::strcmp(d.name, "loss") == 0 && d.dtype == FSDPRT_F32 &&
               d.rank == 0;
      }))
    throw std::runtime_error(o.plan + " has no f32 scalar output 'loss'");

  // The starting state: the model's weights, or a checkpoint (parameters,
  // optimizer state and the step it was saved at, from any world size).
  int64_t step = 0;
  if (o.resume.empty()) {
    check(fsdprt_session_load_weights(session.get()),
          "cannot load the weights");
  } else {
    check(fsdprt_session_load_sharded_checkpoint(session.get(),
                                                 o.resume.c_str(), &step),
          "cannot resume from " + o.resume);
    if (rank == 0)
      std::printf("resumed from %s at step %lld\n", o.resume.c_str(),
                  static_cast<long long>(step));
  }

  for (int64_t done = 0; done < o.steps; ++done) {
    ++step;
    for (const DataInput &in : data) {
      size_t batch = static_cast<size_t>(step - 1) % in.batches;
      size_t slice =
          batch * static_cast<size_t>(world) + static_cast<size_t>(rank);
      size_t bytes = npy_tensor_bytes(&in.desc);
      check(fsdprt_session_set_input(session.get(), in.desc.name,
                                     in.file.bytes() + slice * bytes, bytes),
            in.desc.name);
    }
    double lr = learningRate(o, step);
    setScalar(session.get(), *lrInput, lr);
    if (stepInput)
      setScalar(session.get(), *stepInput, static_cast<double>(step));
    check(fsdprt_session_run(session.get()), "step " + std::to_string(step));

    float local = 0;
    check(
        fsdprt_session_get_output(session.get(), "loss", &local, sizeof local),
        "output 'loss'");
    // Each rank's loss is its slice's; their mean is the global batch's.
    double loss = local;
    check(fsdprt_session_mean_over_ranks(session.get(), &loss), "loss");
    if (rank == 0)
      std::printf("step %lld loss %.9g lr %.6g\n", static_cast<long long>(step),
                  loss, lr);
    if (o.checkpointEvery > 0 && step % o.checkpointEvery == 0) {
      std::string dir = o.checkpointDir + "/step-" + std::to_string(step);
      check(fsdprt_session_save_sharded_checkpoint(session.get(), dir.c_str(),
                                                   step),
            "cannot save " + dir);
      if (rank == 0)
        std::printf("saved %s\n", dir.c_str());
    }
    std::fflush(stdout);
  }
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    run(argc, argv, rank, world);
  } catch (const Agreed &e) {
    std::fprintf(stderr, "train: error: [rank %d] %s\n", rank, e.what());
    MPI_Finalize(); // every rank failed the same call; none is waiting
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "train: error: [rank %d] %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1); // no rank is left waiting in a collective
    return 1;
  }
  MPI_Finalize();
  return 0;
}
