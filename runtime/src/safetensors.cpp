//===- safetensors.cpp - The safetensors format, and a small JSON reader --===//

#include "safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace fsdprt::safetensors {

namespace {

const char *dtypeName(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32:
    return "F32";
  case FSDPRT_F16:
    return "F16";
  case FSDPRT_BF16:
    return "BF16";
  case FSDPRT_F64:
    return "F64";
  case FSDPRT_I64:
    return "I64";
  case FSDPRT_I32:
    return "I32";
  case FSDPRT_I16:
    return "I16";
  case FSDPRT_I8:
    return "I8";
  case FSDPRT_U8:
    return "U8";
  case FSDPRT_BOOL:
    return "BOOL";
  }
  return "?";
}

bool dtypeOf(const std::string &name, fsdprt_dtype_t &out) {
  for (fsdprt_dtype_t d :
       {FSDPRT_F32, FSDPRT_F16, FSDPRT_BF16, FSDPRT_F64, FSDPRT_I64, FSDPRT_I32,
        FSDPRT_I16, FSDPRT_I8, FSDPRT_U8, FSDPRT_BOOL})
    if (name == dtypeName(d)) {
      out = d;
      return true;
    }
  return false;
}

struct Parser {
  const std::string &s;
  size_t at = 0;
  std::string error;

  void space() {
    while (at < s.size() && std::strchr(" \t\r\n", s[at]))
      ++at;
  }
  bool fail(const std::string &why) {
    if (error.empty())
      error = why + " at byte " + std::to_string(at);
    return false;
  }
  static int hexDigit(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }
  bool string(std::string &out) {
    if (at >= s.size() || s[at] != '"')
      return fail("expected a string");
    ++at;
    while (at < s.size() && s[at] != '"') {
      char c = s[at++];
      if (c == '\\') {
        if (at >= s.size())
          return fail("unterminated escape");
        char e = s[at++];
        switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (at + 4 > s.size())
            return fail("short \\u escape");
          unsigned code = 0;
          for (size_t end = at + 4; at < end; ++at) {
            int digit = hexDigit(s[at]);
            if (digit < 0)
              return fail("bad \\u escape");
            code = code * 16 + digit;
          }
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          out += e;
        }
      } else if (static_cast<unsigned char>(c) < 0x20) {
        --at;
        return fail("a raw control character in a string"); // JSON's rule
      } else {
        out += c;
      }
    }
    if (at >= s.size())
      return fail("unterminated string");
    ++at;
    return true;
  }
  bool value(Json &out, int depth) {
    if (depth > 64)
      return fail("nested too deeply");
    space();
    if (at >= s.size())
      return fail("unexpected end");
    char c = s[at];
    if (c == '{') {
      out.kind = Json::Object;
      ++at;
      space();
      if (at < s.size() && s[at] == '}') {
        ++at;
        return true;
      }
      while (true) {
        space();
        std::string key;
        if (!string(key))
          return false;
        space();
        if (at >= s.size() || s[at] != ':')
          return fail("expected ':'");
        ++at;
        Json item;
        if (!value(item, depth + 1))
          return false;
        // Which of two values counts would be a guess (Python's json
        // takes the last, other readers the first).
        if (out.get(key))
          return fail("the key \"" + key + "\" twice");
        out.fields.emplace_back(std::move(key), std::move(item));
        space();
        if (at < s.size() && s[at] == ',') {
          ++at;
          continue;
        }
        if (at < s.size() && s[at] == '}') {
          ++at;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.kind = Json::Array;
      ++at;
      space();
      if (at < s.size() && s[at] == ']') {
        ++at;
        return true;
      }
      while (true) {
        Json item;
        if (!value(item, depth + 1))
          return false;
        out.items.push_back(std::move(item));
        space();
        if (at < s.size() && s[at] == ',') {
          ++at;
          continue;
        }
        if (at < s.size() && s[at] == ']') {
          ++at;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.kind = Json::String;
      return string(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      out.kind = Json::Number;
      size_t begin = at;
      while (at < s.size() && std::strchr("-+.eE0123456789", s[at]))
        ++at;
      out.text = s.substr(begin, at - begin);
      return true;
    }
    if (s.compare(at, 4, "null") == 0) {
      at += 4;
      return true;
    }
    return fail("unexpected character");
  }
};

} // namespace

const Json *Json::get(const std::string &key) const {
  for (const auto &[name, value] : fields)
    if (name == key)
      return &value;
  return nullptr;
}

int64_t Json::asInt() const {
  // An integer as written, or -1: "6.5536e4" was read as 6, "1e30" as 1.
  if (kind != Number || text.empty() ||
      text.find_first_not_of("0123456789", text[0] == '-') != std::string::npos)
    return -1;
  try {
    return std::stoll(text);
  } catch (const std::exception &) {
    return -1;
  }
}

std::string parseJson(const std::string &text, Json &out) {
  Parser p{text, 0, {}};
  if (!p.value(out, 0))
    return p.error;
  p.space();
  if (p.at != text.size())
    return "trailing bytes at byte " + std::to_string(p.at);
  return "";
}

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

uint32_t checksum(const void *data, uint64_t bytes) {
  // zlib takes at most a uInt of bytes at a time.
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto *at = static_cast<const Bytef *>(data);
  while (bytes) {
    uInt chunk = static_cast<uInt>(std::min<uint64_t>(bytes, 1u << 30));
    crc = crc32(crc, at, chunk);
    at += chunk;
    bytes -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

bool recordedChecksum(const Header &header, const std::string &name,
                      uint32_t &out) {
  auto it = header.metadata.find("crc32:" + name);
  if (it == header.metadata.end() || it->second.size() != 8 ||
      it->second.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  out = static_cast<uint32_t>(std::stoul(it->second, nullptr, 16));
  return true;
}

std::string typeText(fsdprt_dtype_t dtype, const std::vector<int64_t> &shape) {
  std::string text = std::string(dtypeName(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string write(const std::string &path, const std::vector<Source> &tensors,
                  const std::map<std::string, std::string> &given) {
  std::map<std::string, std::string> metadata = given;
  for (const Source &t : tensors) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", checksum(t.data, t.bytes));
    metadata["crc32:" + t.name] = hex;
  }
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto &[key, value] : metadata) {
    header += (first ? "" : ",") + quote(key) + ":" + quote(value);
    first = false;
  }
  header += "}";
  uint64_t offset = 0;
  for (const Source &t : tensors) {
    header += "," + quote(t.name) + ":{\"dtype\":\"" + dtypeName(t.dtype) +
              "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += "}";
  while (header.size() % 8) // the format pads the header to 8 bytes
    header += ' ';
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::unique_ptr<FILE, int (*)(FILE *)> file(
      std::fopen(temporary.c_str(), "wb"), &std::fclose);
  if (!file)
    return "cannot write '" + temporary + "': " + std::strerror(errno);
  uint64_t length = header.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  bool ok =
      std::fwrite(prefix, 1, 8, file.get()) == 8 &&
      std::fwrite(header.data(), 1, header.size(), file.get()) == header.size();
  for (const Source &t : tensors)
    ok = ok && (t.bytes == 0 ||
                std::fwrite(t.data, 1, t.bytes, file.get()) == t.bytes);
  ok = ok && std::fflush(file.get()) == 0 && ::fsync(fileno(file.get())) == 0;
  int error = errno;
  file.reset();
  if (!ok) {
    std::remove(temporary.c_str());
    return "cannot write '" + temporary + "': " + std::strerror(error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    std::remove(temporary.c_str());
    return "cannot rename '" + temporary + "' to '" + path +
           "': " + std::strerror(error);
  }
  return "";
}

FILE *openRegular(const std::string &path, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    bool directory = S_ISDIR(info.st_mode);
    ::close(fd);
    error = directory ? "'" + path + "' is a directory, not a file"
                      : "cannot read '" + path + "': not a regular file";
    return nullptr;
  }
  FILE *file = ::fdopen(fd, "rb");
  if (!file) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    ::close(fd);
  }
  return file;
}

std::string readHeader(const std::string &path, Header &out) {
  std::string error;
  std::unique_ptr<FILE, int (*)(FILE *)> file(openRegular(path, error),
                                              &std::fclose);
  if (!file)
    return error.find("is a directory") != std::string::npos
               ? "'" + path + "' is a directory, not a safetensors file"
               : error;
  std::fseek(file.get(), 0, SEEK_END);
  long size = std::ftell(file.get());
  std::fseek(file.get(), 0, SEEK_SET);
  unsigned char prefix[8];
  if (size < 8 || std::fread(prefix, 1, 8, file.get()) != 8)
    return "'" + path + "' is not a safetensors file (shorter than 8 bytes)";
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (length > static_cast<uint64_t>(size) - 8 || length > (100u << 20))
    return "'" + path + "' is torn or not a safetensors file: its header of " +
           std::to_string(length) + " bytes does not fit in its " +
           std::to_string(size) + " bytes";
  std::string text(length, '\0');
  if (std::fread(text.data(), 1, length, file.get()) != length)
    return "cannot read the header of '" + path + "'";
  Json json;
  if (std::string error = parseJson(text, json); !error.empty())
    return "'" + path + "' has a malformed header: " + error;
  if (json.kind != Json::Object)
    return "'" + path + "' has a malformed header: not an object";
  out.dataStart = 8 + length;
  uint64_t dataBytes = static_cast<uint64_t>(size) - out.dataStart;
  for (const auto &[name, value] : json.fields) {
    if (name == "__metadata__") {
      // A map of strings (the format's rule). A CRC-32 that does not
      // parse would turn its check off: a damaged header is refused.
      if (value.kind != Json::Object)
        return "'" + path +
               "' has a malformed header: __metadata__ is not "
               "an object of strings";
      for (const auto &[key, item] : value.fields) {
        if (item.kind != Json::String)
          return "'" + path + "' has a malformed header: __metadata__'s '" +
                 key + "' is not a string";
        if (key.rfind("crc32:", 0) == 0 &&
            (item.text.size() != 8 ||
             item.text.find_first_not_of("0123456789abcdef") !=
                 std::string::npos))
          return "'" + path + "' has a malformed CRC-32 for '" + key.substr(6) +
                 "' (8 lowercase hex digits, not '" + item.text +
                 "'): a damaged header";
        out.metadata[key] = item.text;
      }
      continue;
    }
    Entry e;
    const Json *dtype = value.get("dtype"), *shape = value.get("shape"),
               *offsets = value.get("data_offsets");
    if (!dtype || !dtypeOf(dtype->text, e.dtype) || !shape || !offsets ||
        offsets->items.size() != 2)
      return "'" + path + "': tensor '" + name +
             "' has no valid dtype, shape and data_offsets";
    uint64_t numel = 1;
    for (const Json &d : shape->items) {
      if (d.asInt() < 0)
        return "'" + path + "': tensor '" + name + "' has a bad shape";
      e.shape.push_back(d.asInt());
      numel *= static_cast<uint64_t>(d.asInt());
    }
    if (offsets->items[0].asInt() < 0 || offsets->items[1].asInt() < 0)
      return "'" + path + "': tensor '" + name + "' has bad offsets";
    e.begin = offsets->items[0].asInt();
    e.end = offsets->items[1].asInt();
    if (e.end < e.begin)
      return "'" + path + "': tensor '" + name + "' has data_offsets [" +
             std::to_string(e.begin) + ", " + std::to_string(e.end) +
             "] that end before they begin";
    if (e.end - e.begin != numel * fsdprt_dtype_size(e.dtype))
      return "'" + path + "': tensor '" + name + "' has " +
             std::to_string(e.end - e.begin) + " bytes, not what its dtype " +
             "and shape hold";
    if (e.end > dataBytes)
      return "'" + path + "' is torn: tensor '" + name + "' ends at byte " +
             std::to_string(e.end) + " of a data section of " +
             std::to_string(dataBytes);
    out.tensors[name] = e;
  }
  // The tensors tile the data section: in the order of their offsets, each
  // begins where the one before ends (two that overlap would alias bytes).
  std::vector<std::pair<uint64_t, const std::string *>> order;
  for (const auto &[name, e] : out.tensors)
    order.emplace_back(e.begin, &name);
  std::sort(order.begin(), order.end(), [&](const auto &a, const auto &b) {
    return a.first != b.first
               ? a.first < b.first
               : out.tensors[*a.second].end < out.tensors[*b.second].end;
  });
  uint64_t expected = 0;
  const std::string *previous = nullptr;
  for (const auto &[begin, name] : order) {
    if (begin != expected)
      return "'" + path + "': tensor '" + *name + "' begins at byte " +
             std::to_string(begin) + " of the data section, not " +
             std::to_string(expected) + " where " +
             (previous ? "'" + *previous + "' ends" : "the data begins") +
             (begin < expected ? " (the two overlap)" : " (a gap)");
    expected = out.tensors[*name].end;
    previous = name;
  }
  if (expected != dataBytes)
    return "'" + path + "' has " + std::to_string(dataBytes - expected) +
           " bytes after its last tensor";
  // A writer that records CRC-32s records one per tensor (this runtime
  // does); one missing is a damaged header, whose check would be skipped.
  bool anyCrc =
      std::any_of(out.metadata.begin(), out.metadata.end(), [](const auto &m) {
        return m.first.rfind("crc32:", 0) == 0;
      });
  for (const auto &[name, e] : out.tensors)
    if (anyCrc && !out.metadata.count("crc32:" + name))
      return "'" + path + "' has CRC-32s for its tensors but none for '" +
             name + "': a damaged header";
  return "";
}

} // namespace fsdprt::safetensors
