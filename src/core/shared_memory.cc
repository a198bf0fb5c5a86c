#include "core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace inferd {

// One registered range, mapped for as long as the registry or a request holds it.
struct SharedMemoryRegistry::Region {
  SharedMemoryRegionStatus status;
  void* mapping = MAP_FAILED;
  size_t mapping_length = 0;
  uint8_t* bytes = nullptr;  // the registered offset, inside the mapping

  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() {
    if (mapping != MAP_FAILED) munmap(mapping, mapping_length);
  }
};

namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// Closes a file descriptor when it goes out of scope.
class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  int fd_;
};

Status OutsideRegion(const SharedMemoryRef& ref, uint64_t region_size) {
  return Status::InvalidArgument("shared memory region '" + ref.region + "' holds " + std::to_string(region_size) +
                                 " bytes; offset " + std::to_string(ref.offset) + " + byte_size " +
                                 std::to_string(ref.byte_size) + " is out of range");
}

}  // namespace

SharedMemoryRegistry::SharedMemoryRegistry(bool allowed)
    : allowed_(allowed), table_(std::make_shared<const Table>()) {}

SharedMemoryRegistry::~SharedMemoryRegistry() = default;

Status SharedMemoryRegistry::Refused() const {
  return Status::FailedPrecondition(
      "this server does not accept client shared memory; start it with --allow-client-shm");
}

Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key, uint64_t offset,
                                      uint64_t byte_size) {
  if (!allowed_) return Refused();
  if (name.empty()) return Status::InvalidArgument("a shared memory region needs a name");
  if (key.empty()) return Status::InvalidArgument("shared memory region '" + name + "': 'key' is empty");
  if (byte_size == 0) return Status::InvalidArgument("shared memory region '" + name + "': byte_size must be above 0");
  if (offset > UINT64_MAX - byte_size) return Status::InvalidArgument("shared memory region '" + name + "': offset + byte_size overflows");
  MutexLock lock(&write_mu_);
  const std::shared_ptr<const Table> current = table_.load();
  if (current->contains(name)) {
    return Status::AlreadyExists("shared memory region '" + name + "' is already registered");
  }
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return Status::InvalidArgument("shared memory region '" + name + "': cannot open shared memory object '" + key +
                                   "': " + ErrnoText(errno));
  }
  FileCloser closer(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Internal("fstat of shared memory object '" + key + "': " + ErrnoText(errno));
  const uint64_t object_size = static_cast<uint64_t>(st.st_size);
  if (offset + byte_size > object_size) {
    return Status::InvalidArgument("shared memory region '" + name + "': offset " + std::to_string(offset) +
                                   " + byte_size " + std::to_string(byte_size) + " is beyond the " +
                                   std::to_string(object_size) + " bytes of '" + key + "'");
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset / page * page;
  auto region = std::make_shared<Region>();
  region->status = {.name = name, .key = key, .offset = offset, .byte_size = byte_size};
  region->mapping_length = static_cast<size_t>(offset - map_offset + byte_size);
  region->mapping = mmap(nullptr, region->mapping_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         static_cast<off_t>(map_offset));
  if (region->mapping == MAP_FAILED) {
    return Status::InvalidArgument("shared memory region '" + name + "': cannot map '" + key + "': " + ErrnoText(errno));
  }
  region->bytes = static_cast<uint8_t*>(region->mapping) + (offset - map_offset);
  auto next = std::make_shared<Table>(*current);
  next->emplace(name, std::move(region));
  table_.store(std::move(next));
  return Status::Ok();
}

Status SharedMemoryRegistry::Unregister(std::string_view name) {
  if (!allowed_) return Refused();
  MutexLock lock(&write_mu_);
  const std::shared_ptr<const Table> current = table_.load();
  if (name.empty()) {
    table_.store(std::make_shared<const Table>());
    return Status::Ok();
  }
  auto found = current->find(name);
  if (found == current->end()) return Status::NotFound("no shared memory region '" + std::string(name) + "'");
  auto next = std::make_shared<Table>(*current);
  next->erase(std::string(name));
  table_.store(std::move(next));
  return Status::Ok();
}

StatusOr<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::Regions(std::string_view name) const {
  if (!allowed_) return Refused();
  const std::shared_ptr<const Table> table = table_.load();
  std::vector<SharedMemoryRegionStatus> regions;
  if (!name.empty()) {
    auto found = table->find(name);
    if (found == table->end()) return Status::NotFound("no shared memory region '" + std::string(name) + "'");
    regions.push_back(found->second->status);
    return regions;
  }
  for (const auto& [region_name, region] : *table) regions.push_back(region->status);
  return regions;
}

StatusOr<SharedMemoryBytes> SharedMemoryRegistry::Resolve(const SharedMemoryRef& ref) const {
  if (!allowed_) return Refused();
  const std::shared_ptr<const Table> table = table_.load();
  auto found = table->find(ref.region);
  if (found == table->end()) return Status::NotFound("no shared memory region '" + ref.region + "'");
  const std::shared_ptr<const Region>& region = found->second;
  const uint64_t size = region->status.byte_size;
  if (ref.offset > size || ref.byte_size > size - ref.offset) return OutsideRegion(ref, size);
  // Aliasing: the bytes keep the region (and so its mapping) alive.
  return SharedMemoryBytes{.data = std::shared_ptr<uint8_t>(region, region->bytes + ref.offset),
                           .size = static_cast<size_t>(ref.byte_size)};
}

Status SharedMemoryRegistry::AttachInputs(InferRequest& request) const {
  for (const auto& [name, ref] : request.input_regions) {
    Tensor* input = nullptr;
    for (Tensor& candidate : request.inputs) {
      if (candidate.name == name) input = &candidate;
    }
    if (input == nullptr) return Status::Internal("input '" + name + "' has a shared memory region but no tensor");
    auto bytes = Resolve(ref);
    if (!bytes.ok()) return bytes.status().WithPrefix("input '" + name + "'");
    input->byte_size = bytes->size;
    const size_t alignment = std::max<size_t>(1, DataTypeSize(input->dtype));
    if (reinterpret_cast<uintptr_t>(bytes->data.get()) % alignment == 0) {
      input->data = std::move(bytes->data);  // read in place
      continue;
    }
    MutableBuffer aligned = AllocateBuffer(bytes->size);  // kernels need aligned elements
    std::memcpy(aligned.get(), bytes->data.get(), bytes->size);
    input->data = AliasData(aligned.memory, aligned.get());
  }
  return Status::Ok();
}

StatusOr<std::vector<OutputDestination>> SharedMemoryRegistry::ResolveOutputs(const InferRequest& request) const {
  std::vector<OutputDestination> destinations;
  destinations.reserve(request.output_regions.size());
  for (const auto& [name, ref] : request.output_regions) {
    auto bytes = Resolve(ref);
    if (!bytes.ok()) return bytes.status().WithPrefix("output '" + name + "'");
    destinations.push_back({.output = name, .ref = ref, .bytes = std::move(*bytes)});
  }
  return destinations;
}

Status WriteOutputsToSharedMemory(const std::vector<OutputDestination>& destinations, InferResponse& response) {
  for (const OutputDestination& destination : destinations) {
    Tensor* output = nullptr;
    for (Tensor& candidate : response.outputs) {
      if (candidate.name == destination.output) output = &candidate;
    }
    if (output == nullptr) return Status::InvalidArgument("output '" + destination.output + "' is not in the response");
    if (output->byte_size > destination.bytes.size) {
      return Status::InvalidArgument("output '" + destination.output + "' holds " + std::to_string(output->byte_size) +
                                     " bytes; its shared_memory_byte_size is " +
                                     std::to_string(destination.bytes.size));
    }
    if (output->byte_size > 0) std::memcpy(destination.bytes.data.get(), output->data.get(), output->byte_size);
    SharedMemoryRef written = destination.ref;
    written.byte_size = output->byte_size;
    response.output_regions.emplace_back(destination.output, std::move(written));
    output->data.reset();
    output->byte_size = 0;
  }
  return Status::Ok();
}

}  // namespace inferd
