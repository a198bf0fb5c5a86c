// A one-line progress bar on stderr for the long CLI commands (`inferd quantize`): redrawn in
// place on a terminal; elsewhere (a CI log) one line per tenth of the way, not one per step.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace inferd {

class ProgressBar {
 public:
  ProgressBar(std::string label, size_t total)
      : label_(std::move(label)), total_(total), terminal_(isatty(STDERR_FILENO) != 0) {}

  void Update(size_t done) {
    if (total_ == 0) return;
    const size_t tenth = done * 10 / total_;
    if (!terminal_ && tenth == last_tenth_ && done != total_) return;
    last_tenth_ = tenth;
    constexpr size_t kWidth = 30;
    const size_t filled = done * kWidth / total_;
    std::fprintf(stderr, "%s%s [%s%s] %zu/%zu%s", terminal_ ? "\r" : "", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total_, terminal_ && done < total_ ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  size_t total_;
  bool terminal_;
  size_t last_tenth_ = static_cast<size_t>(-1);
};

}  // namespace inferd
