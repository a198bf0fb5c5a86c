// Large byte strings kept for reuse: the HTTP request and answer bodies of image-sized tensors.
//
// Why: each 600 KB body used to be a fresh allocation, which glibc serves from mmap or from a
// thread heap that it trims when the body is freed, so every request faulted its pages in and
// zeroed them again. On the 602 KB tensor at concurrency 8 that was a quarter of the server's CPU
// (page faults, page clearing, Beast's zero-filling resize), and throughput fell as concurrency
// rose. Kept strings have their pages already. Small strings never come here: the pool's one
// mutex is taken twice per large body only (a few thousand a second), never per small request.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace inferd {

class StringPool {
 public:
  struct Limits {
    size_t min_bytes = 64 << 10;  // smaller strings are neither kept nor taken from the pool
    size_t max_bytes = 64 << 20;  // the capacity of all kept strings together
    size_t max_strings = 32;
  };

  explicit StringPool(Limits limits);
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;

  // An empty string with room for `bytes`: a kept one where one fits without wasting more than
  // its size again, else a new one.
  std::string Take(size_t bytes);
  // Keeps `s`'s allocation for a later Take while the limits allow; frees it otherwise.
  void Give(std::string&& s);
  // `s`, shared and read-only; its allocation comes back to the pool when the last holder lets go.
  std::shared_ptr<const std::string> Share(std::string&& s);

  size_t kept_strings() const;
  size_t kept_bytes() const;

 private:
  const Limits limits_;
  mutable std::mutex mutex_;
  std::vector<std::string> kept_;
  size_t kept_bytes_ = 0;
};

// The process's pool for HTTP bodies (never destroyed: a body may be released during exit).
StringPool& BodyStringPool();

}  // namespace inferd
