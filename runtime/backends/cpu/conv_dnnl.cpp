//===- conv_dnnl.cpp - Convolutions as oneDNN primitives ------------------===//
//
// Forward, backward-data and backward-weights convolution primitives of
// oneDNN (its CPU engine, threaded by the same OpenMP as the rest of the
// backend, its kernels picked by oneDNN at run time for the CPU it finds).
// Each kernel creates its primitive once, when the plan is prepared. The
// primitive chooses its own layouts (blocked ones, where its fast kernels
// need them); the operands it reads are reordered into those in the
// session's workspace and its result back to the plan's NCHW / OIHW.
//
//===----------------------------------------------------------------------===//

#include "conv.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace fsdprt::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// OpenMP's thread count on the calling thread for the scope: oneDNN
/// splits a primitive's work for the count it sees when the primitive is
/// created, and a session prepares its kernels outside its runs.
class OmpThreads {
public:
  explicit OmpThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~OmpThreads() { omp_set_num_threads(saved); }

private:
  int saved;
};

/// One operand of the primitive: the plan's tensor, and where the primitive
/// wants it when its layout differs (a workspace buffer and the reorder
/// between the two).
struct Operand {
  int arg;
  const Tensor *tensor;
  memory plain, inner;
  dnnl::reorder reorder;
  uint64_t offset = 0;
  bool reordered = false;
};

/// The primitive, its operands and the workspace layout: the primitive's
/// scratchpad first, then each reordered operand.
struct Conv {
  dnnl::primitive primitive;
  std::vector<Operand> inputs, outputs;
  std::vector<Tensor> tensors; // the operands' tensors, owned
  memory scratchpad;
  dnnl::stream stream;
};

memory::dims dims(std::initializer_list<int64_t> values) {
  return memory::dims(values.begin(), values.end());
}

/// See dnnlConv: at most this many windows, a 1x1 weight gradient on more
/// than one thread takes im2col + GEMM.
constexpr int64_t kFewWindows = 64;

uint64_t aligned(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

/// Binds `tensor` to the primitive's `want` layout: directly when it is the
/// plain one, through a workspace buffer at `*end` otherwise.
Operand bind(int arg, const Tensor *tensor, const memory::desc &plainDesc,
             const memory::desc &want, bool isInput, uint64_t *end) {
  Operand op{arg, tensor, memory(plainDesc, cpuEngine(), nullptr), {}, {}};
  if (want == plainDesc) {
    op.inner = op.plain;
    return op;
  }
  op.reordered = true;
  op.inner = memory(want, cpuEngine(), nullptr);
  op.offset = *end;
  *end += aligned(want.get_size());
  op.reorder = isInput ? dnnl::reorder(op.plain, op.inner)
                       : dnnl::reorder(op.inner, op.plain);
  return op;
}

/// The layout oneDNN is asked for: its own choice (blocked, for its direct
/// kernels), except for a 1x1 window, which runs as GEMMs on the plan's
/// layouts. At ResNet-50's small spatial sizes reordering a 1x1 window's
/// operands to and from blocked layouts costs more than the blocked kernel
/// saves: its weight gradients took 1.3 to 3x as long that way.
Tag layoutFor(const ConvGeometry &g, Tag plain) {
  return g.kh == 1 && g.kw == 1 ? plain : Tag::any;
}

} // namespace

KernelFn dnnlConv(ConvPass pass, const ConvGeometry &g, const Tensor &x,
                  const Tensor &w, const Tensor &y, const Tensor *bias,
                  int threads, Workspace *workspace) {
  if (const char *env = std::getenv("FSDPRT_DNNL");
      env && !std::strcmp(env, "off"))
    return {};
  // oneDNN splits a weight gradient's images across threads, each summing
  // into a copy of dW that are added up after; a 1x1 window over few
  // windows (batch x output pixels) makes that sum cost more than the
  // GEMM. im2col + GEMM splits dW's rows instead (ResNet-50's 1x1 weight
  // gradients at 2x2 and 4x4 pixels, batch 4: 11.9 -> 7.4 ms a step at 2
  // threads; at 1 thread, or over more windows, oneDNN's are faster).
  if (pass == ConvPass::GradWeight && g.kh == 1 && g.kw == 1 && threads > 1 &&
      g.n * g.spatial <= kFewWindows)
    return {};
  if (g.n == 0 || g.c == 0 || g.m == 0 || g.oh == 0 || g.ow == 0)
    return {};
  auto conv = std::make_shared<Conv>();
  conv->tensors = {x, w, y};
  if (bias)
    conv->tensors.push_back(*bias);
  const Tensor *xt = &conv->tensors[0], *wt = &conv->tensors[1],
               *yt = &conv->tensors[2];
  const Tensor *bt = bias ? &conv->tensors[3] : nullptr;

  memory::desc xPlain(dims({g.n, g.c, g.h, g.wd}), memory::data_type::f32,
                      Tag::nchw);
  memory::desc yPlain(dims({g.n, g.m, g.oh, g.ow}), memory::data_type::f32,
                      Tag::nchw);
  bool grouped = g.group > 1;
  memory::dims wDims = grouped ? dims({g.group, g.mg, g.cg, g.kh, g.kw})
                               : dims({g.m, g.cg, g.kh, g.kw});
  Tag wTag = grouped ? Tag::goihw : Tag::oihw;
  memory::desc wPlain(wDims, memory::data_type::f32, wTag);
  memory::desc bPlain(dims({g.m}), memory::data_type::f32, Tag::x);
  memory::desc xAny(xPlain.dims(), memory::data_type::f32,
                    layoutFor(g, Tag::nchw));
  memory::desc yAny(yPlain.dims(), memory::data_type::f32,
                    layoutFor(g, Tag::nchw));
  memory::desc wAny(wDims, memory::data_type::f32, layoutFor(g, wTag));
  // oneDNN counts dilation from 0 (no gap between taps).
  memory::dims strides = dims({g.strides[0], g.strides[1]});
  memory::dims dilates = dims({g.dil[0] - 1, g.dil[1] - 1});
  memory::dims padL = dims({g.pads[0], g.pads[1]});
  memory::dims padR = dims({g.pads[2], g.pads[3]});
  auto algorithm = dnnl::algorithm::convolution_direct;

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  uint64_t end = 0;
  try {
    OmpThreads scope(threads);
    using Fwd = dnnl::convolution_forward;
    Fwd::desc fwdDesc =
        bt ? Fwd::desc(dnnl::prop_kind::forward_training, algorithm, xAny, wAny,
                       bPlain, yAny, strides, dilates, padL, padR)
           : Fwd::desc(dnnl::prop_kind::forward_training, algorithm, xAny, wAny,
                       yAny, strides, dilates, padL, padR);
    Fwd::primitive_desc fwd(fwdDesc, attr, cpuEngine());
    if (pass == ConvPass::Forward) {
      conv->scratchpad = memory(fwd.scratchpad_desc(), cpuEngine(), nullptr);
      end = aligned(fwd.scratchpad_desc().get_size());
      conv->primitive = Fwd(fwd);
      conv->inputs.push_back(
          bind(DNNL_ARG_SRC, xt, xPlain, fwd.src_desc(), true, &end));
      conv->inputs.push_back(
          bind(DNNL_ARG_WEIGHTS, wt, wPlain, fwd.weights_desc(), true, &end));
      if (bt)
        conv->inputs.push_back(
            bind(DNNL_ARG_BIAS, bt, bPlain, fwd.bias_desc(), true, &end));
      conv->outputs.push_back(
          bind(DNNL_ARG_DST, yt, yPlain, fwd.dst_desc(), false, &end));
    } else if (pass == ConvPass::GradInput) {
      using Bwd = dnnl::convolution_backward_data;
      Bwd::primitive_desc bwd(
          Bwd::desc(algorithm, xAny, wAny, yAny, strides, dilates, padL, padR),
          attr, cpuEngine(), fwd);
      conv->scratchpad = memory(bwd.scratchpad_desc(), cpuEngine(), nullptr);
      end = aligned(bwd.scratchpad_desc().get_size());
      conv->primitive = Bwd(bwd);
      conv->inputs.push_back(
          bind(DNNL_ARG_DIFF_DST, yt, yPlain, bwd.diff_dst_desc(), true, &end));
      conv->inputs.push_back(
          bind(DNNL_ARG_WEIGHTS, wt, wPlain, bwd.weights_desc(), true, &end));
      conv->outputs.push_back(bind(DNNL_ARG_DIFF_SRC, xt, xPlain,
                                   bwd.diff_src_desc(), false, &end));
    } else {
      using Bwd = dnnl::convolution_backward_weights;
      Bwd::primitive_desc bwd(
          Bwd::desc(algorithm, xAny, wAny, yAny, strides, dilates, padL, padR),
          attr, cpuEngine(), fwd);
      conv->scratchpad = memory(bwd.scratchpad_desc(), cpuEngine(), nullptr);
      end = aligned(bwd.scratchpad_desc().get_size());
      conv->primitive = Bwd(bwd);
      conv->inputs.push_back(
          bind(DNNL_ARG_SRC, xt, xPlain, bwd.src_desc(), true, &end));
      conv->inputs.push_back(
          bind(DNNL_ARG_DIFF_DST, yt, yPlain, bwd.diff_dst_desc(), true, &end));
      conv->outputs.push_back(bind(DNNL_ARG_DIFF_WEIGHTS, wt, wPlain,
                                   bwd.diff_weights_desc(), false, &end));
    }
    conv->stream = dnnl::stream(cpuEngine());
  } catch (const dnnl::error &) {
    return {}; // oneDNN has no primitive for this geometry
  }
  workspace->reserve(end);
  return [conv, workspace]() -> std::string {
    char *base = workspace->as<char>();
    std::unordered_map<int, memory> args;
    try {
      conv->scratchpad.set_data_handle(base);
      args[DNNL_ARG_SCRATCHPAD] = conv->scratchpad;
      for (Operand &op : conv->inputs) {
        op.plain.set_data_handle(op.tensor->data);
        if (op.reordered) {
          op.inner.set_data_handle(base + op.offset);
          op.reorder.execute(conv->stream, op.plain, op.inner);
        }
        args[op.arg] = op.inner;
      }
      for (Operand &op : conv->outputs) {
        op.plain.set_data_handle(op.tensor->data);
        if (op.reordered)
          op.inner.set_data_handle(base + op.offset);
        args[op.arg] = op.inner;
      }
      conv->primitive.execute(conv->stream, args);
      for (Operand &op : conv->outputs)
        if (op.reordered)
          op.reorder.execute(conv->stream, op.inner, op.plain);
      conv->stream.wait();
    } catch (const dnnl::error &e) {
      return std::string("oneDNN: ") + e.what();
    }
    return std::string();
  };
}

} // namespace fsdprt::cpu
