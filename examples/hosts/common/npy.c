/*===- npy.c - Reading and writing .npy files (example hosts) -------------===*/

#include "npy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *error, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error, size, format, args);
  va_end(args);
  return -1;
}

const char *npy_descr(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32:
    return "<f4";
  case FSDPRT_F16:
    return "<f2";
  case FSDPRT_F64:
    return "<f8";
  case FSDPRT_I64:
    return "<i8";
  case FSDPRT_I32:
    return "<i4";
  case FSDPRT_I16:
    return "<i2";
  case FSDPRT_I8:
    return "|i1";
  case FSDPRT_U8:
    return "|u1";
  case FSDPRT_BOOL:
    return "|b1";
  default:
    return "";
  }
}

/* The value of `key` in the header dict: the text after "'key': ". */
static const char *field(const char *header, const char *key) {
  char quoted[32];
  snprintf(quoted, sizeof quoted, "'%s':", key);
  const char *at = strstr(header, quoted);
  if (!at)
    return NULL;
  at += strlen(quoted);
  while (*at == ' ')
    ++at;
  return at;
}

int npy_read(const char *path, npy_array_t *out, char *error, size_t size) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(error, size, "cannot open '%s'", path);
  unsigned char magic[10];
  char *header = NULL;
  int status = -1;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
    fail(error, size, "'%s' is not a .npy file", path);
    goto done;
  }
  size_t length;
  if (magic[6] == 1) {
    if (fread(magic + 8, 1, 2, f) != 2)
      goto truncated;
    length = magic[8] | (size_t)magic[9] << 8;
  } else {
    unsigned char four[4];
    if (fread(four, 1, 4, f) != 4)
      goto truncated;
    length = four[0] | (size_t)four[1] << 8 | (size_t)four[2] << 16 |
             (size_t)four[3] << 24;
  }
  header = calloc(length + 1, 1);
  if (!header || fread(header, 1, length, f) != length)
    goto truncated;
  const char *descr = field(header, "descr");
  const char *order = field(header, "fortran_order");
  const char *shape = field(header, "shape");
  if (!descr || *descr != '\'' || !order || !shape || *shape != '(') {
    fail(error, size, "'%s' has a .npy header this host cannot read", path);
    goto done;
  }
  size_t n = strcspn(descr + 1, "'");
  if (n >= sizeof out->descr) {
    fail(error, size, "'%s' has dtype %.*s", path, (int)n, descr + 1);
    goto done;
  }
  memcpy(out->descr, descr + 1, n);
  if (strncmp(order, "False", 5) != 0) {
    fail(error, size, "'%s' is in Fortran order; save it C-ordered", path);
    goto done;
  }
  size_t numel = 1;
  for (const char *p = shape + 1; *p && *p != ')';) {
    char *end;
    long long dim = strtoll(p, &end, 10);
    if (end == p)
      break;
    if (dim < 0 || out->rank == NPY_MAX_RANK) {
      fail(error, size, "'%s' has an unsupported shape", path);
      goto done;
    }
    out->shape[out->rank++] = dim;
    numel *= (size_t)dim;
    p = end + strspn(end, ", ");
  }
  size_t element = (size_t)atoi(out->descr + 2);
  out->bytes = numel * element;
  out->data = malloc(out->bytes ? out->bytes : 1);
  if (!out->data || fread(out->data, 1, out->bytes, f) != out->bytes)
    goto truncated;
  status = 0;
  goto done;
truncated:
  fail(error, size, "'%s' is truncated", path);
done:
  free(header);
  fclose(f);
  if (status)
    npy_free(out);
  return status;
}

int npy_write(const char *path, const char *descr, const int64_t *shape,
              size_t rank, const void *data, size_t bytes, char *error,
              size_t size) {
  char dims[256];
  npy_shape_text(shape, rank, dims, sizeof dims);
  char header[512];
  int n = snprintf(header, sizeof header,
                   "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                   descr, dims);
  /* Pad with spaces to a multiple of 64 bytes, ending in a newline. */
  size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
  size_t length = total - 10;
  memset(header + n, ' ', length - (size_t)n - 1);
  header[length - 1] = '\n';
  unsigned char prefix[10] = {0x93,
                              'N',
                              'U',
                              'M',
                              'P',
                              'Y',
                              1,
                              0,
                              (unsigned char)(length & 0xff),
                              (unsigned char)(length >> 8)};
  FILE *f = fopen(path, "wb");
  if (!f)
    return fail(error, size, "cannot create '%s'", path);
  int ok = fwrite(prefix, 1, 10, f) == 10 &&
           fwrite(header, 1, length, f) == length &&
           fwrite(data, 1, bytes, f) == bytes;
  if (fclose(f) != 0 || !ok)
    return fail(error, size, "cannot write '%s'", path);
  return 0;
}

void npy_free(npy_array_t *array) {
  free(array->data);
  array->data = NULL;
}

void npy_shape_text(const int64_t *shape, size_t rank, char *text,
                    size_t size) {
  size_t used = (size_t)snprintf(text, size, "(");
  for (size_t i = 0; i < rank && used < size; ++i)
    used += (size_t)snprintf(text + used, size - used, "%lld%s",
                             (long long)shape[i],
                             rank == 1 ? "," : (i + 1 < rank ? ", " : ""));
  if (used < size)
    snprintf(text + used, size - used, ")");
}

size_t npy_tensor_bytes(const fsdprt_tensor_desc_t *desc) {
  size_t bytes = fsdprt_dtype_size(desc->dtype);
  for (size_t d = 0; d < desc->rank; ++d)
    bytes *= (size_t)desc->shape[d];
  return bytes;
}

size_t npy_global_batches(const npy_array_t *array, const char *path,
                          const fsdprt_tensor_desc_t *desc, int world,
                          char *error, size_t size) {
  int fits = strcmp(array->descr, npy_descr(desc->dtype)) == 0 &&
             desc->rank > 0 && array->rank == desc->rank &&
             desc->shape[0] > 0 && array->shape[0] > 0 &&
             array->shape[0] % (desc->shape[0] * world) == 0;
  for (size_t d = 1; fits && d < desc->rank; ++d)
    fits = array->shape[d] == desc->shape[d];
  if (fits)
    return (size_t)(array->shape[0] / (desc->shape[0] * world));
  int64_t global[NPY_MAX_RANK] = {0};
  for (size_t d = 0; d < desc->rank && d < NPY_MAX_RANK; ++d)
    global[d] = d == 0 ? desc->shape[0] * world : desc->shape[d];
  char got[128], want[128];
  npy_shape_text(array->shape, array->rank, got, sizeof got);
  npy_shape_text(global, desc->rank, want, sizeof want);
  fail(error, size,
       "'%s' is %s %s, but a global batch of the plan's input '%s' on %d "
       "rank(s) is %s (%s) %s",
       path, array->descr, got, desc->name, world, npy_descr(desc->dtype),
       fsdprt_dtype_name(desc->dtype), want);
  return 0;
}
