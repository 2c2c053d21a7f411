/*===- npy.h - Reading and writing .npy files (example hosts) -------------===*
 *
 * Just enough of NumPy's format for the example hosts: version 1-3
 * headers, little-endian C-order arrays of the dtypes a plan declares.
 * Functions return 0 on success, or -1 with a one-line reason in `error`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FSDP_EXAMPLES_NPY_H
#define FSDP_EXAMPLES_NPY_H

#include <fsdprt/fsdprt.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPY_MAX_RANK 8

typedef struct npy_array_s {
  char descr[8]; /* "<f4", "<i8", "|b1", ... */
  size_t rank;
  int64_t shape[NPY_MAX_RANK];
  void *data; /* malloc'd; release with npy_free */
  size_t bytes;
} npy_array_t;

/* The .npy descr of a plan dtype ("" if .npy cannot hold it: bf16). */
const char *npy_descr(fsdprt_dtype_t dtype);

int npy_read(const char *path, npy_array_t *out, char *error, size_t size);
int npy_write(const char *path, const char *descr, const int64_t *shape,
              size_t rank, const void *data, size_t bytes, char *error,
              size_t size);
void npy_free(npy_array_t *array);

/* Writes `shape` as NumPy prints it: "(4, 16)", "(4,)", "()". */
void npy_shape_text(const int64_t *shape, size_t rank, char *text, size_t size);

/* How many global batches of `world` ranks `array` (read from `path`)
 * holds for the plan input `desc`: its dtype is the input's, its first
 * dimension a multiple of `world` times the input's, its other dimensions
 * the input's. Batch b, rank r is slice b * world + r of the first
 * dimension, npy_tensor_bytes(desc) each. Returns 0 with a reason naming the
 * file and both shapes in `error` if the array is none of that. */
size_t npy_global_batches(const npy_array_t *array, const char *path,
                          const fsdprt_tensor_desc_t *desc, int world,
                          char *error, size_t size);

/* The bytes of one plan tensor (one rank's slice of a global batch). */
size_t npy_tensor_bytes(const fsdprt_tensor_desc_t *desc);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_EXAMPLES_NPY_H */
