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

#ifdef __cplusplus
}
#endif

#endif /* FSDP_EXAMPLES_NPY_H */
