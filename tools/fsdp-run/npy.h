//===- npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// The subset of the .npy format (numpy/lib/format.py) fsdp-run needs:
// format versions 1.0, 2.0 and 3.0, C order, little-endian numeric and bool
// dtypes. Errors throw NpyError with a message naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUN_NPY_H
#define FSDP_RUN_NPY_H

#include "fsdprt/fsdprt.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp::npy {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A C-order array: its NumPy descr ("<f4", "|b1", ...), shape and bytes.
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Reads `path`. Throws NpyError when the file cannot be read, is not a
/// .npy file, is in Fortran order, has a dtype outside descrs() or holds
/// more or fewer bytes than its shape says.
Array read(const std::string &path);

/// Parses a .npy file's bytes; `path` names it in messages.
Array parse(const std::vector<char> &bytes, const std::string &path);

/// Writes `array` to `path` (format 1.0, or 2.0 for a header too large).
void write(const std::string &path, const Array &array);

/// The temporary file write() fills before renaming it to `path`
/// (`path.tmp`; one a killed run left is overwritten by the next).
inline std::string temporaryOf(const std::string &path) {
  return path + ".tmp";
}

/// The descr of a plan dtype ("" when .npy has none, as for bfloat16).
const char *descrOf(fsdprt_dtype_t dtype);

/// Every descr read() accepts, for messages: "<f4, <f8, ...".
std::string descrs();

/// The size in bytes of one element of `descr` (0 if unsupported).
size_t elementSize(const std::string &descr);

} // namespace fsdp::npy

#endif // FSDP_RUN_NPY_H
