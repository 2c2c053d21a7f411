//===- npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// Layout: the magic "\x93NUMPY", a major and minor version byte, the header
// length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), then the header:
// a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces and ending in '\n'. The data
// follows, row-major.
//
//===----------------------------------------------------------------------===//

#include "npy.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

namespace fsdp::npy {
namespace {

struct Descr {
  fsdprt_dtype_t dtype;
  const char *descr;
};

/// The dtypes fsdp-run exchanges: little-endian, as NumPy writes them on
/// x86 and ARM.
const Descr kDescrs[] = {
    {FSDPRT_F32, "<f4"}, {FSDPRT_F64, "<f8"}, {FSDPRT_F16, "<f2"},
    {FSDPRT_I64, "<i8"}, {FSDPRT_I32, "<i4"}, {FSDPRT_I16, "<i2"},
    {FSDPRT_I8, "|i1"},  {FSDPRT_U8, "|u1"},  {FSDPRT_BOOL, "|b1"}};

/// A reader of the header's Python literal: a dict of strings, booleans
/// and a tuple of integers.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &path)
      : text(text), path(path) {}

  Array parse() {
    Array array;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    std::set<std::string> seen;
    expect('{');
    while (!accept('}')) {
      std::string key = string();
      expect(':');
      // A repeated key is not a dict NumPy writes; which one counts would
      // be a guess.
      if (!seen.insert(key).second)
        fail("has the header key '" + key + "' twice");
      if (key == "descr") {
        // A structured dtype is a list of fields, not a string.
        if (accept('['))
          fail("has a structured dtype, which fsdp-run does not read (" +
               descrs() + ")");
        array.descr = string();
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (word() != "False")
          fail("is in Fortran order; save it C-contiguous "
               "(numpy.ascontiguousarray)");
        haveOrder = true;
      } else if (key == "shape") {
        array.shape = tuple();
        haveShape = true;
      } else {
        fail("has an unknown header key '" + key + "'");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!haveDescr || !haveOrder || !haveShape)
      fail("lacks one of 'descr', 'fortran_order' and 'shape' in its header");
    skipSpace(); // NumPy pads with spaces and a newline
    if (at != text.size())
      fail("has text after its header's dict (at " + std::to_string(at) + ")");
    return array;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw NpyError("'" + path + "' " + what);
  }

  void skipSpace() {
    while (at < text.size() &&
           std::isspace(static_cast<unsigned char>(text[at])))
      ++at;
  }

  bool accept(char c) {
    skipSpace();
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!accept(c))
      fail(std::string("has a malformed header (expected '") + c + "' at " +
           std::to_string(at) + ")");
  }

  std::string string() {
    skipSpace();
    if (at >= text.size() || (text[at] != '\'' && text[at] != '"'))
      fail("has a malformed header (expected a string at " +
           std::to_string(at) + ")");
    char quote = text[at++];
    size_t end = text.find(quote, at);
    if (end == std::string::npos)
      fail("has a malformed header (unterminated string)");
    std::string value = text.substr(at, end - at);
    for (char c : value)
      if (std::iscntrl(static_cast<unsigned char>(c)))
        fail("has a control character in a header string");
    at = end + 1;
    return value;
  }

  std::string word() {
    skipSpace();
    size_t begin = at;
    while (at < text.size() &&
           std::isalnum(static_cast<unsigned char>(text[at])))
      ++at;
    return text.substr(begin, at - begin);
  }

  std::vector<int64_t> tuple() {
    std::vector<int64_t> values;
    expect('(');
    while (!accept(')')) {
      std::string digits = word();
      if (digits.empty() ||
          digits.find_first_not_of("0123456789") != std::string::npos ||
          digits.size() > 18)
        fail("has a malformed shape in its header");
      values.push_back(std::stoll(digits));
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return values;
  }

  const std::string &text;
  const std::string &path;
  size_t at = 0;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

} // namespace

const char *descrOf(fsdprt_dtype_t dtype) {
  for (const Descr &d : kDescrs)
    if (d.dtype == dtype)
      return d.descr;
  return "";
}

std::string descrs() {
  std::string text;
  for (const Descr &d : kDescrs)
    text += (text.empty() ? "" : ", ") + std::string(d.descr);
  return text;
}

size_t elementSize(const std::string &descr) {
  for (const Descr &d : kDescrs)
    if (descr == d.descr)
      return fsdprt_dtype_size(d.dtype);
  return 0;
}

namespace {

/// The bytes before a .npy file's header (magic, version, header length)
/// and the header's length, from the file's first `available` bytes.
std::pair<size_t, size_t> headerExtent(const char *bytes, size_t available,
                                       const std::string &path) {
  if (available < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0)
    throw NpyError("'" + path + "' is not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    throw NpyError("'" + path + "' has .npy format version " +
                   std::to_string(major) + ", not 1, 2 or 3");
  size_t width = major == 1 ? 2 : 4, length = 0;
  if (available < 8 + width)
    throw NpyError("'" + path + "' is truncated");
  for (size_t i = width; i-- > 0;)
    length = length << 8 | static_cast<unsigned char>(bytes[8 + i]);
  return {8 + width, length};
}

/// The array a .npy file of `fileSize` bytes declares (no data), from its
/// header at bytes[begin, begin + length); `data`: where its data starts.
/// Refuses a file whose size is not the header's and the shape's.
Array parseHeader(const char *bytes, size_t begin, size_t length,
                  uint64_t fileSize, const std::string &path, size_t &data) {
  if (fileSize - begin < length)
    throw NpyError("'" + path + "' is truncated");
  std::string header(bytes + begin, length);
  Array array = HeaderParser(header, path).parse();
  size_t size = elementSize(array.descr);
  if (!size)
    throw NpyError("'" + path + "' has dtype '" + array.descr +
                   "', which fsdp-run does not read (" + descrs() + ")");
  uint64_t numel = 1;
  for (int64_t d : array.shape) {
    if (d && numel > (uint64_t(1) << 56) / d)
      throw NpyError("'" + path + "' has a shape too large");
    numel *= d;
  }
  data = begin + length;
  uint64_t expected = numel * size;
  if (fileSize - data != expected)
    throw NpyError("'" + path + "' holds " + std::to_string(fileSize - data) +
                   " bytes of data, but its shape " + shapeText(array.shape) +
                   " of " + array.descr + " needs " + std::to_string(expected));
  return array;
}

} // namespace

Array parse(const std::vector<char> &bytes, const std::string &path) {
  auto [begin, length] = headerExtent(bytes.data(), bytes.size(), path);
  size_t data;
  Array array =
      parseHeader(bytes.data(), begin, length, bytes.size(), path, data);
  array.data.assign(bytes.begin() + data, bytes.end());
  return array;
}

Array read(const std::string &path) {
  std::error_code code;
  if (std::filesystem::is_directory(path, code))
    throw NpyError("'" + path + "' is a directory, not a .npy file");
  // A device (/dev/zero) would be read until memory runs out, a FIFO would
  // block the open.
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    throw NpyError("cannot open '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    throw NpyError("cannot read '" + path + "': not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw NpyError("cannot open '" + path + "': " + std::strerror(errno));
  // The header first, checked against the file's size, then the data: a
  // 6 GB file was read whole before its header said it was wrong (and one
  // larger than memory ended in std::bad_alloc).
  uint64_t fileSize = static_cast<uint64_t>(info.st_size);
  auto readAt = [&](std::vector<char> &into, size_t from, size_t count) {
    into.resize(from + count);
    if (!in.read(into.data() + from, static_cast<std::streamsize>(count)))
      throw NpyError("cannot read '" + path + "'" +
                     (in.eof() ? ": it is shorter than it was" : ""));
  };
  std::vector<char> head;
  readAt(head, 0, static_cast<size_t>(std::min<uint64_t>(fileSize, 12)));
  auto [begin, length] = headerExtent(head.data(), head.size(), path);
  constexpr size_t kMaxHeader = size_t(1) << 20;
  if (length > kMaxHeader)
    throw NpyError("'" + path + "' has a header of " + std::to_string(length) +
                   " bytes; NumPy's are a few hundred (at most " +
                   std::to_string(kMaxHeader) + " read)");
  if (fileSize < begin + length)
    throw NpyError("'" + path + "' is truncated");
  if (begin + length > head.size())
    readAt(head, head.size(), begin + length - head.size());
  size_t data;
  Array array = parseHeader(head.data(), begin, length, fileSize, path, data);
  readAt(array.data, 0, static_cast<size_t>(fileSize - data));
  return array;
}

void write(const std::string &path, const Array &array) {
  std::string header =
      "{'descr': '" + array.descr +
      "', 'fortran_order': False, 'shape': " + shapeText(array.shape) + ", }";
  // NumPy pads the header so that the data starts 64-byte aligned.
  bool v2 = header.size() + 12 > 65535;
  size_t prefix = v2 ? 12 : 10;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  // Written beside `path` and renamed over it: a run killed while writing
  // leaves the previous file (or none), never half an array.
  std::string temporary = temporaryOf(path);
  std::ofstream out(temporary, std::ios::binary);
  out.write(v2 ? "\x93NUMPY\x02\x00" : "\x93NUMPY\x01\x00", 8);
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    out.put(static_cast<char>(header.size() >> (8 * i) & 0xff));
  out << header;
  out.write(array.data.data(), array.data.size());
  out.close();
  if (!out) {
    std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    throw NpyError("cannot write '" + path + "': " + why);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    throw NpyError("cannot write '" + path + "': " + why);
  }
}

} // namespace fsdp::npy
