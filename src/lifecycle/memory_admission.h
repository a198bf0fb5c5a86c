// Memory admission: a model load that would take the process past its share of the container's
// memory limit is refused with an error that says why, instead of going ahead until the kernel's
// OOM killer ends the process and every model serving in it.
//
// Before each instance of a model loads, the need is estimated: for the first instance twice the
// model's files (its weights as loaded and as packed), for each further one what the first was
// measured to hold once planned (Model::Footprint: weights and packed weights, plus the largest
// memory-plan arena).
// The load goes ahead when the group's working set (what the kubelet and the OOM killer judge),
// plus what loads in flight have reserved, plus the need, stays within `fraction` x the limit. A
// reservation lasts until its instance is loaded, when the working set has taken it over, so two
// models loading at once cannot each be admitted against the same free memory.
//
// Without a memory limit (no cgroup, or "max") nothing is refused: there is no line to keep behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "common/status.h"

namespace inferd {

struct MemoryReading {
  int64_t limit_bytes = 0;
  int64_t working_set_bytes = 0;
};

class MemoryAdmission {
 public:
  // nullopt: no memory limit applies.
  using Reader = std::function<std::optional<MemoryReading>()>;

  // `fraction` in (0, 1]: the share of the limit that loads may fill.
  MemoryAdmission(double fraction, Reader reader);
  // Reads this process's cgroup (common/container_resources.h).
  static std::unique_ptr<MemoryAdmission> ForProcess(double fraction);

  // Holds admitted bytes until the instance they were for has loaded (or failed to).
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation();

   private:
    friend class MemoryAdmission;
    Reservation(MemoryAdmission* owner, int64_t bytes) : owner_(owner), bytes_(bytes) {}
    MemoryAdmission* owner_ = nullptr;
    int64_t bytes_ = 0;
  };

  // Admits `need_bytes` more for `what` ("model 'm' version 1, instance 2 of 4"), described by
  // `estimate` ("weights 98 MiB + arena 12 MiB, as instance 1 holds"), or refuses with
  // RESOURCE_EXHAUSTED and the numbers.
  StatusOr<Reservation> Admit(int64_t need_bytes, const std::string& what, const std::string& estimate)
      EXCLUDES(mu_);

  double fraction() const { return fraction_; }

 private:
  void Release(int64_t bytes) EXCLUDES(mu_);

  const double fraction_;
  const Reader reader_;
  Mutex mu_;
  int64_t reserved_ GUARDED_BY(mu_) = 0;
};

// The bytes of the files in a version folder, less those a backend writes there for itself: what
// the first instance's estimate starts from, before anything is loaded.
int64_t ModelFilesBytes(const std::filesystem::path& version_dir);

// "412 MiB" (rounded to nearest): sizes in messages.
std::string Mebibytes(int64_t bytes);

}  // namespace inferd
