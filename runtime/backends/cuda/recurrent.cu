//===- recurrent.cu - LSTM, GRU and RNN steps on the device ---------------===//
//
// The device launcher (launch.h) of kernels/recurrent.h's body.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchRecurrent(const RecurrentBody &body, int64_t n,
                            cudaStream_t s) {
  return elementwise(body, n, s);
}

} // namespace fsdprt::cuda
