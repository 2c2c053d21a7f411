//===- hazards.cpp - Stream hazards ---------------------------------------===//

#include "hazards.h"

#include <algorithm>
#include <sstream>

namespace fsdprt::cuda {

int HazardChecker::addStream() {
  for (auto &clock : clocks)
    clock.push_back(0);
  clocks.emplace_back(clocks.size() + 1, 0);
  return static_cast<int>(clocks.size()) - 1;
}

std::string HazardChecker::run(int stream, const Work &work) {
  std::vector<uint64_t> &mine = clocks[stream];
  uint64_t now = ++mine[stream];
  auto check = [&](const Range &r, bool write) -> std::string {
    for (const Access &a : history) {
      if (a.stream == stream || a.time <= mine[a.stream])
        continue; // ordered: same stream, or behind an event
      if (!(write || a.write) || r.end <= a.range.begin ||
          a.range.end <= r.begin)
        continue;
      uintptr_t lo = std::max(r.begin, a.range.begin),
                hi = std::min(r.end, a.range.end);
      std::ostringstream out;
      out << "stream hazard: '" << work.name << "' on stream " << stream
          << (write ? " writes " : " reads ") << hi - lo << " bytes at 0x"
          << std::hex << lo << std::dec << " that '" << a.name
          << "' on stream " << a.stream << (a.write ? " wrote" : " read")
          << ", with no event between them";
      return out.str();
    }
    return "";
  };
  for (const Range &r : work.reads)
    if (std::string hazard = check(r, false); !hazard.empty())
      return hazard;
  for (const Range &r : work.writes)
    if (std::string hazard = check(r, true); !hazard.empty())
      return hazard;
  for (const Range &r : work.reads)
    history.push_back({stream, now, false, r, work.name});
  for (const Range &r : work.writes)
    history.push_back({stream, now, true, r, work.name});
  // What every stream has behind it can never conflict again.
  history.erase(std::remove_if(history.begin(), history.end(),
                               [&](const Access &a) {
                                 for (const auto &clock : clocks)
                                   if (a.time > clock[a.stream])
                                     return false;
                                 return true;
                               }),
                history.end());
  return "";
}

void HazardChecker::wait(int stream, const std::vector<uint64_t> &event) {
  for (size_t t = 0; t < event.size(); ++t)
    clocks[stream][t] = std::max(clocks[stream][t], event[t]);
}

void HazardChecker::synchronize() {
  std::vector<uint64_t> all(clocks.size(), 0);
  for (size_t s = 0; s < clocks.size(); ++s)
    all[s] = clocks[s][s];
  for (auto &clock : clocks)
    clock = all;
  history.clear();
}

} // namespace fsdprt::cuda
