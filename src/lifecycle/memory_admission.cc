#include "lifecycle/memory_admission.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <system_error>

#include "backends/backend.h"
#include "common/container_resources.h"

namespace inferd {
std::string Mebibytes(int64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

MemoryAdmission::MemoryAdmission(double fraction, Reader reader) : fraction_(fraction), reader_(std::move(reader)) {}

std::unique_ptr<MemoryAdmission> MemoryAdmission::ForProcess(double fraction) {
  return std::make_unique<MemoryAdmission>(fraction, []() -> std::optional<MemoryReading> {
    const ContainerResources& resources = ProcessResources();
    if (!resources.memory_limit_bytes) return std::nullopt;
    const std::optional<int64_t> working_set = MemoryWorkingSetBytes(resources);
    if (!working_set) return std::nullopt;
    return MemoryReading{*resources.memory_limit_bytes, *working_set};
  });
}

StatusOr<MemoryAdmission::Reservation> MemoryAdmission::Admit(int64_t need_bytes, const std::string& what,
                                                              const std::string& estimate) {
  const std::optional<MemoryReading> reading = reader_();
  if (!reading) return Reservation();
  MutexLock lock(&mu_);
  const auto budget = static_cast<int64_t>(std::floor(fraction_ * static_cast<double>(reading->limit_bytes)));
  const int64_t committed = reading->working_set_bytes + reserved_;
  if (committed + need_bytes > budget) {
    std::string message = what + " needs about " + Mebibytes(need_bytes) + " (" + estimate + "), but the process " +
                          "uses " + Mebibytes(reading->working_set_bytes) + " of its " +
                          Mebibytes(reading->limit_bytes) + " memory limit";
    if (reserved_ > 0) message += ", loads in progress have reserved " + Mebibytes(reserved_);
    message += ", and --memory-limit-fraction " + fmt::format("{:g}", fraction_) + " leaves " +
               Mebibytes(std::max<int64_t>(0, budget - committed)) +
               ": load refused, so that the OOM killer does not end the models already serving";
    return Status::ResourceExhausted(std::move(message));
  }
  reserved_ += need_bytes;
  return Reservation(this, need_bytes);
}

void MemoryAdmission::Release(int64_t bytes) {
  MutexLock lock(&mu_);
  reserved_ -= bytes;
}

MemoryAdmission::Reservation::Reservation(Reservation&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MemoryAdmission::Reservation& MemoryAdmission::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (owner_) owner_->Release(bytes_);
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryAdmission::Reservation::~Reservation() {
  if (owner_) owner_->Release(bytes_);
}

int64_t ModelFilesBytes(const std::filesystem::path& version_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  int64_t total = 0;
  for (fs::recursive_directory_iterator it(version_dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code file_error;
    if (!it->is_regular_file(file_error) || IsWrittenByBackend(it->path())) continue;
    const auto size = it->file_size(file_error);
    if (!file_error) total += static_cast<int64_t>(size);
  }
  return total;
}

}  // namespace inferd
