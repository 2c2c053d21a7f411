//===- NpyTest.cpp - The .npy reader and writer ---------------------------===//

#include "npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <unistd.h>

namespace npy = fsdp::npy;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/fsdp_npy_" + name;
}

std::vector<char> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A .npy file of format `major` with `header` (padded here) and `data`.
std::vector<char> npyBytes(int major, std::string header, size_t dataBytes) {
  size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<char> bytes = {
      '\x93', 'N', 'U', 'M', 'P', 'Y', static_cast<char>(major), 0};
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes.push_back(static_cast<char>(header.size() >> (8 * i) & 0xff));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + dataBytes, '\x01');
  return bytes;
}

/// The message of the NpyError parsing `bytes` throws ("" if none).
std::string parseError(const std::vector<char> &bytes) {
  try {
    npy::parse(bytes, "f.npy");
  } catch (const npy::NpyError &e) {
    return e.what();
  }
  return "";
}

TEST(Npy, WritesWhatNumPyWritesAndReadsItBack) {
  struct Case {
    fsdprt_dtype_t dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {FSDPRT_F32, {2, 3}},    {FSDPRT_F64, {}},   {FSDPRT_I64, {5}},
      {FSDPRT_I32, {1, 2, 2}}, {FSDPRT_BOOL, {4}}, {FSDPRT_U8, {0}},
      {FSDPRT_I8, {3}},        {FSDPRT_I16, {2}},  {FSDPRT_F16, {2}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(fsdprt_dtype_name(c.dtype));
    size_t numel = 1;
    for (int64_t d : c.shape)
      numel *= d;
    npy::Array array{npy::descrOf(c.dtype), c.shape,
                     std::vector<char>(numel * fsdprt_dtype_size(c.dtype))};
    for (size_t i = 0; i < array.data.size(); ++i)
      array.data[i] = static_cast<char>(i * 7 + 1);
    std::string path = tempPath("roundtrip.npy");
    npy::write(path, array);
    std::vector<char> bytes = readBytes(path);
    ASSERT_GE(bytes.size(), 10u);
    size_t header = static_cast<unsigned char>(bytes[8]) |
                    static_cast<unsigned char>(bytes[9]) << 8;
    EXPECT_EQ(bytes[6], 1); // format 1.0
    EXPECT_EQ((10 + header) % 64, 0u) << "data is not 64-byte aligned";
    EXPECT_EQ(bytes[10 + header - 1], '\n');
    npy::Array back = npy::read(path);
    EXPECT_EQ(back.descr, array.descr);
    EXPECT_EQ(back.shape, array.shape);
    EXPECT_EQ(back.data, array.data);
  }
  EXPECT_EQ(std::string(npy::descrOf(FSDPRT_BF16)), "");
}

TEST(Npy, ShapesAreWrittenAsPythonTuples) {
  std::string path = tempPath("tuple.npy");
  npy::write(path, {"<f4", {3}, std::vector<char>(12)});
  std::vector<char> bytes = readBytes(path);
  std::string header(bytes.begin() + 10, bytes.end());
  EXPECT_NE(
      header.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
      std::string::npos)
      << header;
  npy::write(path, {"<f4", {}, std::vector<char>(4)});
  bytes = readBytes(path);
  header.assign(bytes.begin() + 10, bytes.end());
  EXPECT_NE(header.find("'shape': (), }"), std::string::npos) << header;
}

TEST(Npy, ReadsFormatVersionsTwoAndThree) {
  for (int major : {2, 3}) {
    auto bytes = npyBytes(
        major, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1), }",
        16);
    npy::Array array = npy::parse(bytes, "v.npy");
    EXPECT_EQ(array.descr, "<i8");
    EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(array.data.size(), 16u);
  }
  // Keys in any order, no trailing comma.
  auto bytes =
      npyBytes(1, "{'shape': (), 'fortran_order': False, 'descr': '|b1'}", 1);
  EXPECT_EQ(npy::parse(bytes, "v.npy").descr, "|b1");
}

TEST(Npy, RefusesWhatItCannotRead) {
  const std::string ok = "'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(parseError({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0}),
            "'f.npy' is not a .npy file");
  EXPECT_EQ(parseError(npyBytes(1,
                                "{'descr': '<f4', 'fortran_order': True, "
                                "'shape': (2, 2), }",
                                16)),
            "'f.npy' is in Fortran order; save it C-contiguous "
            "(numpy.ascontiguousarray)");
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': '>f4', " + ok, 8)),
            "'f.npy' has dtype '>f4', which fsdp-run does not read (<f4, <f8, "
            "<f2, <i8, <i4, <i2, |i1, |u1, |b1)");
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': '<U3', " + ok, 24)).substr(0, 28),
            "'f.npy' has dtype '<U3', whi");
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': '<f4', " + ok, 4)),
            "'f.npy' holds 4 bytes of data, but its shape (2,) of <f4 needs 8");
  EXPECT_EQ(
      parseError(npyBytes(1, "{'descr': '<f4', " + ok, 12)),
      "'f.npy' holds 12 bytes of data, but its shape (2,) of <f4 needs 8");
  EXPECT_EQ(parseError(npyBytes(4, "{'descr': '<f4', " + ok, 8)),
            "'f.npy' has .npy format version 4, not 1, 2 or 3");
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': '<f4', 'shape': (2,), }", 8)),
            "'f.npy' lacks one of 'descr', 'fortran_order' and 'shape' in its "
            "header");
  EXPECT_EQ(parseError(npyBytes(1,
                                "{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (2, x), }",
                                8)),
            "'f.npy' has a malformed shape in its header");
  EXPECT_NE(parseError(npyBytes(1, "['descr']", 0)).find("malformed header"),
            std::string::npos);
  // Which of two 'descr' keys counts would be a guess.
  EXPECT_EQ(
      parseError(npyBytes(1, "{'descr': '<f4', 'descr': '<i8', " + ok, 8)),
      "'f.npy' has the header key 'descr' twice");
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': [('a', '<f4')], " + ok, 8)),
            "'f.npy' has a structured dtype, which fsdp-run does not read "
            "(<f4, <f8, <f2, <i8, <i4, <i2, |i1, |u1, |b1)");
  auto truncated = npyBytes(1, "{'descr': '<f4', " + ok, 8);
  truncated.resize(20);
  EXPECT_EQ(parseError(truncated), "'f.npy' is truncated");
  try {
    npy::read(tempPath("missing.npy"));
    ADD_FAILURE() << "no error for a missing file";
  } catch (const npy::NpyError &e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"),
              std::string::npos)
        << e.what();
  }
}

/// The message of the NpyError reading `bytes` written to `path` and
/// extended (sparsely) to `size` bytes throws ("" if none).
std::string sparseReadError(const std::string &path,
                            const std::vector<char> &bytes, int64_t size) {
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::string message;
  if (truncate(path.c_str(), size) != 0)
    return "cannot extend the file";
  try {
    npy::read(path);
  } catch (const npy::NpyError &e) {
    message = e.what();
  }
  std::remove(path.c_str());
  return message;
}

/// The header is read and checked against the file's size before the data:
/// a sparse 6 GB file was read whole before it was refused (one larger than
/// memory ended in std::bad_alloc, naming no file). Text after the header's
/// dict and control characters in its strings are refused.
TEST(Npy, ChecksTheHeaderBeforeReadingTheData) {
  std::string path = tempPath("sparse.npy");
  std::vector<char> bytes = npyBytes(
      1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  // 64 GiB, sparse: reading it would take minutes and more memory than CI has.
  EXPECT_EQ(sparseReadError(path, bytes, int64_t(64) << 30),
            "'" + path + "' holds " +
                std::to_string((int64_t(64) << 30) -
                               static_cast<int64_t>(bytes.size() - 8)) +
                " bytes of data, but its shape (2,) of <f4 needs 8");
  // A header length NumPy never writes (1 GiB).
  EXPECT_EQ(sparseReadError(
                path, {'\x93', 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 64},
                int64_t(2) << 30),
            "'" + path +
                "' has a header of 1073741824 bytes; NumPy's are a few "
                "hundred (at most 1048576 read)");
  const std::string ok = "'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(parseError(npyBytes(1, "{'descr': '<f4', " + ok + " junk!!", 8)),
            "'f.npy' has text after its header's dict (at 58)");
  EXPECT_EQ(
      parseError(npyBytes(1, std::string("{'descr': '<f4\0x', ", 20) + ok, 8)),
      "'f.npy' has a control character in a header string");
}

/// write() renames a finished temporary over the file: another name for the
/// old file (a hard link) keeps the old contents, and nothing else is left.
/// Written in place, a run killed mid-write left half an array.
TEST(Npy, WritesByRenamingAFinishedFile) {
  std::string path = tempPath("atomic.npy"), link = tempPath("atomic-link.npy");
  std::remove(path.c_str());
  std::remove(link.c_str());
  npy::write(path, {"<f4", {1}, std::vector<char>(4)});
  ASSERT_EQ(::link(path.c_str(), link.c_str()), 0);
  npy::write(path, {"<f4", {3}, std::vector<char>(12)});
  EXPECT_EQ(npy::read(path).shape, std::vector<int64_t>{3});
  EXPECT_EQ(npy::read(link).shape, std::vector<int64_t>{1});
  EXPECT_FALSE(std::ifstream(npy::temporaryOf(path)).good());
  try {
    npy::write(tempPath("no-such-dir/x.npy"), {"<f4", {1}, {0, 0, 0, 0}});
    ADD_FAILURE() << "no error for a missing directory";
  } catch (const npy::NpyError &e) {
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos)
        << e.what();
  }
}

} // namespace
