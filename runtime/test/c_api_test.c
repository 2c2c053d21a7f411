/*===- c_api_test.c - The C API used from a C99 program -------------------===*
 *
 * Compiled with -std=c99 -pedantic -Werror: proves the header is C99-clean and
 * that a C host can drive the library, errors included.
 *
 *===----------------------------------------------------------------------===*/

#include "fsdprt/fsdprt.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* Expects `status` to be a failure with `code` and a message containing
 * `text`; frees it. */
static void expect_error(fsdprt_status_t status, fsdprt_status_code_t code,
                         const char *text) {
  CHECK(status != NULL);
  CHECK(fsdprt_status_code(status) == code);
  if (!strstr(fsdprt_status_message(status), text)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", fsdprt_status_message(status),
            text);
    ++failures;
  }
  fsdprt_status_free(status);
}

int main(void) {
  int major = -1, minor = -1, patch = -1;
  char expected[32];
  int64_t numels[3] = {6, 3, 4};
  fsdprt_layout_t *layout = NULL;
  int64_t begin = -1, end = -1, padding = -1;
  fsdprt_param_shard_t shards[2];
  size_t count = 0;

  fsdprt_version(&major, &minor, &patch);
  CHECK(major == FSDPRT_VERSION_MAJOR && minor == FSDPRT_VERSION_MINOR &&
        patch == FSDPRT_VERSION_PATCH);
  sprintf(expected, "%d.%d.%d", major, minor, patch);
  CHECK(strcmp(fsdprt_version_string(), expected) == 0);

  CHECK(fsdprt_status_code(NULL) == FSDPRT_OK);
  CHECK(strcmp(fsdprt_status_message(NULL), "") == 0);
  CHECK(fsdprt_status_agreed(NULL) == 0);
  CHECK(strcmp(fsdprt_status_code_name(FSDPRT_OUT_OF_RANGE), "OUT_OF_RANGE") ==
        0);
  CHECK(strcmp(fsdprt_status_code_name(FSDPRT_PEER_FAILED), "PEER_FAILED") ==
        0);
  fsdprt_status_free(NULL);

  CHECK(fsdprt_layout_create(numels, 3, 4, 1, &layout) == NULL);
  CHECK(layout != NULL);
  CHECK(fsdprt_layout_padded_numel(layout) == 16);
  CHECK(fsdprt_layout_shard_numel(layout) == 4);

  CHECK(fsdprt_layout_param_range(layout, 2, &begin, &end) == NULL);
  CHECK(begin == 9 && end == 13);

  CHECK(fsdprt_layout_shard_range(layout, 3, &begin, &end, &padding) == NULL);
  CHECK(begin == 12 && end == 16 && padding == 3);

  CHECK(fsdprt_layout_param_shards(layout, 1, NULL, 0, &count) == NULL);
  CHECK(count == 2);
  CHECK(fsdprt_layout_param_shards(layout, 1, shards, 2, &count) == NULL);
  CHECK(shards[0].param_index == 0 && shards[0].param_begin == 4 &&
        shards[0].param_end == 6 && shards[0].shard_begin == 0 &&
        shards[0].shard_end == 2);
  CHECK(shards[1].param_index == 1 && shards[1].param_begin == 0 &&
        shards[1].param_end == 2 && shards[1].shard_begin == 2 &&
        shards[1].shard_end == 4);

  /* Errors come back as statuses with messages, and outputs stay untouched. */
  begin = -7;
  expect_error(fsdprt_layout_shard_range(layout, 4, &begin, &end, NULL),
               FSDPRT_OUT_OF_RANGE, "rank 4 is outside [0, 4)");
  CHECK(begin == -7);
  expect_error(fsdprt_layout_param_shards(layout, 1, shards, 1, &count),
               FSDPRT_OUT_OF_RANGE, "holds 2 parameter pieces but capacity is 1");
  expect_error(fsdprt_layout_param_range(layout, 3, &begin, &end),
               FSDPRT_OUT_OF_RANGE, "parameter index 3 is outside [0, 3)");
  expect_error(fsdprt_layout_shard_range(NULL, 0, &begin, &end, NULL),
               FSDPRT_INVALID_ARGUMENT, "layout is NULL");
  fsdprt_layout_destroy(layout);
  fsdprt_layout_destroy(NULL);

  layout = NULL;
  expect_error(fsdprt_layout_create(numels, 3, 0, 1, &layout),
               FSDPRT_INVALID_ARGUMENT, "world size must be at least 1, got 0");
  CHECK(layout == NULL);
  expect_error(fsdprt_layout_create(NULL, 2, 2, 1, &layout),
               FSDPRT_INVALID_ARGUMENT, "numels is NULL");

  /* Sessions: NULL arguments are errors, never crashes. */
  {
    fsdprt_session_t *session = NULL;
    float buffer[4];
    uint64_t bytes = 7;
    expect_error(fsdprt_session_create(NULL, NULL, 0, &session),
                 FSDPRT_INVALID_ARGUMENT, "NULL argument");
    CHECK(session == NULL);
    expect_error(fsdprt_session_load_weights(NULL), FSDPRT_INVALID_ARGUMENT,
                 "NULL argument");
    expect_error(fsdprt_session_set_input(NULL, "x", buffer, sizeof buffer),
                 FSDPRT_INVALID_ARGUMENT, "NULL argument");
    expect_error(fsdprt_session_run(NULL), FSDPRT_INVALID_ARGUMENT,
                 "NULL argument");
    expect_error(fsdprt_session_get_output(NULL, "y", buffer, sizeof buffer),
                 FSDPRT_INVALID_ARGUMENT, "NULL argument");
    expect_error(fsdprt_session_memory(NULL, &bytes, NULL, NULL),
                 FSDPRT_INVALID_ARGUMENT, "NULL argument");
    CHECK(bytes == 7);
    fsdprt_session_destroy(NULL);
    CHECK(fsdprt_dtype_size(FSDPRT_BF16) == 2);
    CHECK(strcmp(fsdprt_dtype_name(FSDPRT_BOOL), "bool") == 0);
  }

  if (failures) {
    fprintf(stderr, "c_api_test: %d checks failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
