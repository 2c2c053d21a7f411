//===- kernel_check.cpp - Would a session prepare a plan's kernels? -------===//

#include "kernel_check.h"

#include "backend.h"

namespace fsdprt {
namespace {

/// Buffer `id` of `plan` as a tensor bound to no memory, or false when the
/// plan has no such buffer.
bool unboundTensor(const plan::Plan &plan, uint32_t id, Tensor &t) {
  const auto *buffers = plan.buffers();
  if (!buffers || id >= buffers->size())
    return false;
  const plan::Buffer *b = buffers->Get(id);
  t.dtype = static_cast<fsdprt_dtype_t>(b->dtype());
  if (b->shape())
    t.shape.assign(b->shape()->begin(), b->shape()->end());
  for (int64_t d : t.shape)
    t.numel *= d;
  return true;
}

/// " (f32 [2, 3], ...)": the dtypes and shapes of `tensors`.
std::string signature(const std::vector<Tensor> &tensors) {
  std::string text = "(";
  for (size_t i = 0; i < tensors.size(); ++i) {
    text += (i ? ", " : "") + std::string(fsdprt_dtype_name(tensors[i].dtype));
    text += " [";
    for (size_t d = 0; d < tensors[i].shape.size(); ++d)
      text += (d ? ", " : "") + std::to_string(tensors[i].shape[d]);
    text += "]";
  }
  return text + ")";
}

/// Why `backend` refuses kernel `k`, or "".
std::string refusal(Backend &backend, const plan::Plan &plan,
                    const plan::Kernel &k, Workspace &workspace) {
  // A session gives random kernels its seed and step; any will do here.
  static const RandomState random;
  KernelArgs args{{}, {}, Attrs(k), 1, &workspace};
  args.random = &random;
  for (auto [ids, list] : {std::make_pair(k.inputs(), &args.in),
                           std::make_pair(k.outputs(), &args.out)}) {
    if (!ids)
      continue;
    for (uint32_t id : *ids) {
      list->emplace_back();
      if (!unboundTensor(plan, id, list->back()))
        return "names buffer " + std::to_string(id) + ", which the plan lacks";
    }
  }
  std::string op = k.op() ? k.op()->str() : "";
  std::string kernel = "kernel '" + op + "' on " + signature(args.in) + " -> " +
                       signature(args.out) + ": ";
  try {
    backend.prepare(op, args);
    return "";
  } catch (const KernelError &e) {
    return kernel + e.what();
  }
}

} // namespace

std::vector<KernelRefusal> checkKernelsOnCpu(const plan::Plan &plan) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  Workspace workspace; // sized by the factories, never allocated
  std::vector<KernelRefusal> refusals;
  const auto *kernels = plan.kernels();
  for (size_t i = 0; kernels && i < kernels->size(); ++i) {
    const plan::Kernel *k = kernels->Get(i);
    if (k->stream() != 0) // collectives: the communicator's, not a kernel
      continue;
    std::string why = refusal(*backend, plan, *k, workspace);
    if (!why.empty())
      refusals.push_back({i, why});
  }
  return refusals;
}

} // namespace fsdprt
