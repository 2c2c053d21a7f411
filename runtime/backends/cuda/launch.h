//===- launch.h - The CUDA backend's own kernels, launched -------*- C++ -*-===//
//
// Device launchers of the kernel bodies in kernels/ (built by nvcc in
// kernels.cu for sm_80 and sm_90, warnings and register spills errors).
// Each enqueues one kernel on `stream` and returns the launch's error.
// Their host twins are host_launch.h's launchers over the same bodies.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_LAUNCH_H
#define FSDPRT_BACKENDS_CUDA_LAUNCH_H

#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/copy.h"
#include "kernels/data.h"
#include "kernels/elementwise.h"
#include "kernels/grads.h"
#include "kernels/grid_sample.h"
#include "kernels/indexing.h"
#include "kernels/logic.h"
#include "kernels/losses.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/random.h"
#include "kernels/recurrent.h"
#include "kernels/reduce.h"
#include "kernels/rows.h"
#include "kernels/scatter.h"

#include <cuda_runtime_api.h>

namespace fsdprt::cuda {

/// A unary function (with its attributes, if it has any) of n elements.
cudaError_t launchUnary(Unary op, UnaryParams params, const float *x, float *y,
                        int64_t n, cudaStream_t stream);
/// is_inf or isnan of n fp32 elements (the body's x, y and flags).
cudaError_t launchFloatClass(const FloatClassBody &body, int64_t n,
                             cudaStream_t stream);
/// cast of n elements: fp32 to `half` (bf16 or f16), or back.
cudaError_t launchCast(bool toHalf, fsdprt_dtype_t half, const void *x, void *y,
                       int64_t n, cudaStream_t stream);
cudaError_t launchBinary(Binary op, const Broadcast &plan, const float *a,
                         const float *b, float *y, int64_t n,
                         cudaStream_t stream);
/// ONNX Cast of n elements between any two dtypes AnyCast takes.
cudaError_t launchAnyCast(fsdprt_dtype_t from, fsdprt_dtype_t to,
                          const void *x, void *y, int64_t n,
                          cudaStream_t stream);
/// int64 neg, abs (wrapping) or sign of n elements.
cudaError_t launchUnary64(Unary op, const int64_t *x, int64_t *y, int64_t n,
                          cudaStream_t stream);
/// The same on int64 (Pow, PRelu: cudaErrorInvalidValue).
cudaError_t launchBinary(Binary op, const Broadcast &plan, const int64_t *a,
                         const int64_t *b, int64_t *y, int64_t n,
                         cudaStream_t stream);
/// The same on a narrow integer `dtype` (I32, I16, I8, U8), wrapping as
/// the CPU does (another dtype, Pow, PRelu: cudaErrorInvalidValue).
cudaError_t launchIntegerBinary(Binary op, fsdprt_dtype_t dtype,
                                const Broadcast &plan, const void *a,
                                const void *b, void *y, int64_t n,
                                cudaStream_t stream);
/// pow of an int64 base by an I64, I32, F32 or F64 `exponent`
/// (PowInt64Body; another dtype: cudaErrorInvalidValue).
cudaError_t launchPowInt64(fsdprt_dtype_t exponent, const Broadcast &plan,
                           const int64_t *a, const void *b, int64_t *y,
                           int64_t n, cudaStream_t stream);
/// a comparison of two F32, I64 or Bool operands (`dtype`), or and, or,
/// xor of two Bool ones, broadcast by `plan` (planBroadcast of the
/// output and the two operands): n Bool (one byte, 0 or 1) outputs.
/// Another dtype: cudaErrorInvalidValue.
cudaError_t launchLogic(Logic op, fsdprt_dtype_t dtype, const Broadcast &plan,
                        const void *a, const void *b, uint8_t *y, int64_t n,
                        cudaStream_t stream);
/// not of n Bool elements.
cudaError_t launchNot(const uint8_t *x, uint8_t *y, int64_t n,
                      cudaStream_t stream);
/// where of n elements of `elementSize` bytes (1, 2, 4 or 8): plan is
/// planBroadcast of the output and (cond, a, b), in that order.
cudaError_t launchWhere(size_t elementSize, const Broadcast &plan,
                        const uint8_t *cond, const void *a, const void *b,
                        void *y, int64_t n, cudaStream_t stream);
/// Training-mode dropout (kernels/random.h): body.blocks() threads.
cudaError_t launchDropout(const DropoutBody &body, cudaStream_t stream);
/// random_uniform, random_normal, bernoulli (kernels/random.h):
/// body.blocks() threads.
cudaError_t launchDraw(const DrawBody &body, cudaStream_t stream);
/// Softmax or log-softmax of rows [outer, n, inner].
cudaError_t launchSoftmax(bool log, const float *x, float *y, int64_t outer,
                          int64_t n, int64_t inner, cudaStream_t stream);
/// reduce_sum or reduce_mean of rows [outer, n, inner] into [outer, inner].
cudaError_t launchSum(bool mean, const float *x, float *y, int64_t outer,
                      int64_t n, int64_t inner, cudaStream_t stream);
/// A float reduction of x into y[plan.rows], over any axes (plan:
/// planReduce of x's shape and the axes; kernels/reduce.h, reduce());
/// also global_average_pool (reduce_mean over the spatial dims). scratch:
/// reduceScratchFloats(kind, plan) floats.
cudaError_t launchReduce(Reduce kind, const ReducePlan &plan, const float *x,
                         float *y, float *scratch, cudaStream_t stream);
/// reduce_sum, reduce_prod, reduce_sum_square, reduce_max or reduce_min of
/// I32 or I64 (kernels/reduce.h), one thread per output element.
cudaError_t launchIntegerReduce(const IntegerReduceBody &body,
                                cudaStream_t stream);
/// Layer norm or RMS norm of `rows` contiguous rows of n elements (and
/// each row's mean and inverse std where `stats` says).
cudaError_t launchNorm(bool rms, const float *x, const float *scale,
                       const float *bias, float *y, int64_t rows, int64_t n,
                       float eps, RowStats stats, cudaStream_t stream);

/// gather of elements of `elementSize` bytes (1, 2, 4 or 8) with I64 (or,
/// with indices32, I32) indices: y [outer, count, inner] from data
/// [outer, dim, inner]. Bad indices go to `error`.
cudaError_t launchGather(size_t elementSize, bool indices32, const void *data,
                         const void *indices, void *y, int64_t outer,
                         int64_t dim, int64_t count, int64_t inner,
                         ErrorSlot *error, cudaStream_t stream);

/// gather_grad: y [outer, dim, inner] zero but for each g[o, k, :] (g
/// [outer, count, inner]) added at row indices[k] (I64, or with indices32
/// I32), summed in increasing k: the CPU backend's bits, every run.
/// `scratch` holds gatherGradScratch(count, dim) int64s; bad indices go to
/// `error`. 3 + ceil(log2 count) kernels.
cudaError_t launchGatherGrad(bool indices32, const float *g,
                             const void *indices, float *y, int64_t outer,
                             int64_t dim, int64_t count, int64_t inner,
                             int64_t *scratch, ErrorSlot *error,
                             cudaStream_t stream);

/// pad of n output elements of `elementSize` bytes; `fill`: the constant's
/// bits (low bytes).
cudaError_t launchPad(size_t elementSize, const PadShape &shape, const void *x,
                      void *y, int64_t n, uint64_t fill, cudaStream_t stream);
/// trilu of n elements of `elementSize` bytes (kernels/indexing.h).
cudaError_t launchTrilu(size_t elementSize, const void *x, void *y, int64_t n,
                        int64_t rows, int64_t cols, int64_t k,
                        const int64_t *kInput, bool upper, cudaStream_t stream);
/// cumsum of `lines` lines [outer, dim, inner] of F32, F64, I64 or I32;
/// with `axisInput`, of the lines of the axis it reads (`lines`: its
/// maxLines()).
cudaError_t launchCumsum(fsdprt_dtype_t dtype, const void *x, void *y,
                         int64_t lines, int64_t dim, int64_t inner,
                         bool exclusive, bool reverse, cudaStream_t stream,
                         const CumsumAxisInput &axisInput = {});
/// gather_elements of n elements of `elementSize` bytes (I64 or, with
/// indices32, I32 indices); bad indices go to `error`.
cudaError_t launchGatherElements(size_t elementSize, bool indices32,
                                 const AxisWalk &walk, const void *data,
                                 const void *indices, void *y, int64_t n,
                                 ErrorSlot *error, cudaStream_t stream);
/// scatter_elements over `lines` lines of y (args.walk).
cudaError_t launchScatterElements(const ScatterArgs &args, int64_t lines,
                                  cudaStream_t stream);
/// scatter_nd: y is data already; args.slice threads.
cudaError_t launchScatterND(const ScatterArgs &args, cudaStream_t stream);

/// A strided read (kernels/data.h) of n elements of `elementSize` bytes.
cudaError_t launchStridedRead(size_t elementSize, const Broadcast &plan,
                              const void *x, void *y, int64_t offset, int64_t n,
                              cudaStream_t stream);

/// max_pool (max) or average_pool of x [planes, h, w] into y [planes, oh,
/// ow] (planes: N * C; the window's sizes as the CPU's checks give them).
cudaError_t launchPool(bool max, const PoolWindow &window, const float *x,
                       float *y, int64_t planes, cudaStream_t stream);
/// max_pool with Indices (kernels/pool.h) over `planes` planes.
cudaError_t launchMaxPoolIndices(const MaxPoolIndicesBody &body,
                                 int64_t planes, cudaStream_t stream);
/// resize over n threads (y's elements; at least 1 with run-time scales).
cudaError_t launchResize(const ResizeBody &body, int64_t n,
                         cudaStream_t stream);
/// grid_sample or one output of its gradient: body.threads() threads.
cudaError_t launchGridSample(const GridSampleBody &body, cudaStream_t stream);
/// global_max_pool of `planes` planes of `inner` elements.
cudaError_t launchGlobalMaxPool(const float *x, float *y, int64_t planes,
                                int64_t inner, cudaStream_t stream);
/// arg_max / arg_min (kernels/rows.h) over outer * inner rows.
cudaError_t launchArgExtreme(const ArgExtremeBody &body, int64_t rows,
                             cudaStream_t stream);
/// hardmax of rows [outer, n, inner], one thread per row.
cudaError_t launchHardmax(const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, cudaStream_t stream);
/// pool_grad (mode max, or average): dx [planes, h, w] from x and the
/// gradient g [planes, oh, ow]; every element of dx is written.
cudaError_t launchPoolGrad(bool max, const PoolWindow &window, const float *x,
                           const float *g, float *dx, int64_t planes,
                           cudaStream_t stream);
/// batch_norm of x [n, channels, inner] with per-channel scale, bias, mean
/// and var.
cudaError_t launchBatchNorm(const float *x, const float *scale,
                            const float *bias, const float *mean,
                            const float *var, float *y, int64_t n,
                            int64_t channels, int64_t inner, float eps,
                            cudaStream_t stream);
/// batch_norm_train and batch_norm_grad, one thread per channel.
cudaError_t launchBatchNormTrain(const BatchNormTrainBody &body,
                                 cudaStream_t stream);
cudaError_t launchBatchNormGrad(const BatchNormGradBody &body,
                                cudaStream_t stream);
/// invStd [channels] = 1 / sqrt(var + eps).
cudaError_t launchInverseStd(const float *var, float *invStd, int64_t channels,
                             float eps, cudaStream_t stream);

/// activation_grad over n elements (kernels/grads.h).
cudaError_t launchActivationGrad(const ActivationGradBody &body, int64_t n,
                                 cudaStream_t stream);
/// layer_norm_grad / rms_norm_grad (kernels/grads.h, normGrad): dx, then
/// dscale and dbias through the chunks' sums in args.scratch.
cudaError_t launchNormGrad(const NormGradArgs &args, cudaStream_t stream);

/// adamw / sgd over n elements (kernels/optim.h); outputs may alias inputs.
cudaError_t launchAdamW(const AdamWBody &body, int64_t n, cudaStream_t stream);
cudaError_t launchSGD(const SGDBody &body, int64_t n, cudaStream_t stream);

/// One pointwise piece of an lstm, gru or rnn step or of its gradient
/// (kernels/recurrent.h) over n elements.
cudaError_t launchRecurrent(const RecurrentBody &body, int64_t n,
                            cudaStream_t stream);

/// im2col of `images` images x [images, channels, h, w] into col [images,
/// window.rows(), oh * ow] (zero in the padding).
cudaError_t launchIm2col(const ConvWindow &window, const float *x, float *col,
                         int64_t images, cudaStream_t stream);
/// col2im: every element of x [images, channels, h, w] set to the sum of
/// the entries of col that read it (gathered: no atomics, the CPU's sums).
cudaError_t launchCol2im(const ConvWindow &window, const float *col, float *x,
                         int64_t images, cudaStream_t stream);

/// concat of elements of `elementSize` bytes (1, 2, 4 or 8): pieces[k]
/// into its place in `whole` (plan: planPieces of the whole's shape, the
/// axis and the pieces' lengths along it). One kernel per piece.
cudaError_t launchConcat(size_t elementSize, const void *const *pieces,
                         void *whole, const std::vector<Piece> &plan,
                         cudaStream_t stream);
/// split: the inverse of launchConcat, the same plan.
cudaError_t launchSplit(size_t elementSize, const void *whole,
                        void *const *pieces, const std::vector<Piece> &plan,
                        cudaStream_t stream);
/// copy of n elements (x and y do not overlap, unless they are the same).
cudaError_t launchCopy(size_t elementSize, const void *x, void *y, int64_t n,
                       cudaStream_t stream);
/// pack: members[i] into `flat` at its offset, zeros elsewhere (plan:
/// planPack of the offsets, the members' sizes and the flat size).
cudaError_t launchPack(size_t elementSize, const void *const *members,
                       void *flat, const PackPlan &plan, cudaStream_t stream);

/// softmax_cross_entropy over `positions` positions into y ([positions]
/// for reduction none, else one value); `scratch` holds 2 * positions
/// floats. Bad labels go to in.error.
cudaError_t launchCrossEntropy(const CrossEntropyInputs &in, int64_t positions,
                               bool none, bool mean, float *scratch, float *y,
                               cudaStream_t stream);
/// softmax_cross_entropy_grad; `scratch` holds positions + 1 floats.
cudaError_t launchCrossEntropyGrad(const CrossEntropyInputs &in,
                                   int64_t positions, const float *g, bool none,
                                   bool mean, float *scratch, float *y,
                                   cudaStream_t stream);

/// nll_loss over `positions` positions into y ([positions] for reduction
/// none, else one value); `scratch` holds 2 * positions floats. Bad
/// targets go to in.error.
cudaError_t launchNllLoss(const NllInputs &in, int64_t positions, bool none,
                          bool mean, float *scratch, float *y,
                          cudaStream_t stream);
/// nll_loss_grad into y (n elements); `scratch` holds positions + 1 floats.
cudaError_t launchNllLossGrad(const NllInputs &in, int64_t positions,
                              const float *g, bool none, bool mean,
                              float *scratch, float *y, int64_t n,
                              cudaStream_t stream);

/// attention: y and (when args.lse is set) lse from q, k_t, v and the mask
/// (kernels/attention.h), in tiles of planAttentionTiles. Head dims whose
/// tiles do not fit in shared memory: cudaErrorInvalidValue.
cudaError_t launchAttention(const AttentionArgs &args, cudaStream_t stream);
/// attention_grad: dq, then dk_t and dv (two kernels).
cudaError_t launchAttentionGrad(const AttentionArgs &args, cudaStream_t stream);

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_LAUNCH_H
