//===- nccl_bootstrap.cpp - NCCL's start-up and deadlines, host code ------===//

#include "nccl_bootstrap.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>

namespace fsdprt::cuda {

std::string parseIdStore(const std::string &spec, IdStore &store) {
  auto colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  std::string where = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if ((kind != "file" && kind != "env") || where.empty())
    return "the NCCL id store '" + spec +
           "' is not file:PATH or env:NAME";
  store.kind = kind == "file" ? IdStore::File : IdStore::Env;
  store.where = where;
  return "";
}

std::string idToHex(const UniqueId &id) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : id) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::string idFromHex(const std::string &hex, UniqueId &id) {
  if (hex.size() != 2 * kUniqueIdBytes)
    return "an NCCL id is " + std::to_string(2 * kUniqueIdBytes) +
           " hex digits, not " + std::to_string(hex.size()) + " characters";
  auto value = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    int hi = value(hex[2 * i]), lo = value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return "an NCCL id holds only hex digits; character " +
             std::to_string(2 * i + (hi < 0 ? 0 : 1)) + " is not one";
    id[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return "";
}

std::string publishId(const IdStore &store, const UniqueId &id) {
  if (store.kind != IdStore::File)
    return "";
  std::string tmp = store.where + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(id.data()), id.size());
    out.flush();
    if (!out)
      return "cannot write the NCCL id to '" + tmp + "'";
  }
  if (std::rename(tmp.c_str(), store.where.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "cannot move the NCCL id into '" + store.where + "'";
  }
  return "";
}

std::string fetchId(const IdStore &store, double timeoutSeconds, UniqueId &id) {
  if (store.kind == IdStore::Env) {
    const char *hex = std::getenv(store.where.c_str());
    if (!hex)
      return "the NCCL id store env:" + store.where + " is not set (the "
             "launcher sets it on every rank)";
    std::string error = idFromHex(hex, id);
    return error.empty() ? "" : "env:" + store.where + ": " + error;
  }
  auto start = std::chrono::steady_clock::now();
  while (true) {
    struct stat info {};
    if (stat(store.where.c_str(), &info) == 0) {
      if (!S_ISREG(info.st_mode))
        return "the NCCL id store '" + store.where + "' is not a regular file";
      std::ifstream in(store.where, std::ios::binary);
      in.read(reinterpret_cast<char *>(id.data()), id.size());
      if (in.gcount() == static_cast<std::streamsize>(id.size()) &&
          in.peek() == std::ifstream::traits_type::eof())
        return "";
      return "the NCCL id store '" + store.where + "' has " +
             std::to_string(info.st_size) + " bytes, not " +
             std::to_string(kUniqueIdBytes);
    }
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start).count();
    if (timeoutSeconds > 0 && waited > timeoutSeconds)
      return "no NCCL id appeared at '" + store.where + "' within " +
             std::to_string(timeoutSeconds) + " s (is rank 0 running, with the "
             "same store?)";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Watchdog::Watchdog(double timeoutSeconds, Abort abort, double periodSeconds)
    : timeout(timeoutSeconds), period(periodSeconds), abort(std::move(abort)) {
  if (timeout > 0)
    thread = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  stop.notify_all();
  if (thread.joinable())
    thread.join();
}

uint64_t Watchdog::begin(const std::string &what, std::function<bool()> finished) {
  std::lock_guard<std::mutex> lock(mutex);
  inFlight[next] = {what, std::chrono::steady_clock::now(), std::move(finished)};
  return next++;
}

void Watchdog::end(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex);
  inFlight.erase(ticket);
}

std::string Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mutex);
  return firedWith;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping && firedWith.empty()) {
    stop.wait_for(lock, std::chrono::duration<double>(period));
    auto now = std::chrono::steady_clock::now();
    for (auto it = inFlight.begin(); it != inFlight.end();)
      it = it->second.finished && it->second.finished() ? inFlight.erase(it) : std::next(it);
    for (const auto &[ticket, entry] : inFlight) {
      double age = std::chrono::duration<double>(now - entry.started).count();
      if (age <= timeout)
        continue;
      firedWith = entry.what + " timed out after " + std::to_string(age) +
                  " s (a peer died or stalled; the deadline is " +
                  std::to_string(timeout) + " s): the communicator is aborted";
      std::string message = firedWith;
      lock.unlock(); // the abort may call back (end) or take long
      abort(message);
      lock.lock();
      break;
    }
  }
}

} // namespace fsdprt::cuda
