#include "client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace inferd::client {

StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(const std::string& key, size_t byte_size) {
  if (byte_size == 0) return Status::InvalidArgument("a shared memory region needs at least one byte");
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Status::InvalidArgument("cannot create shared memory object '" + key + "': " + std::strerror(errno));
  void* mapping = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(byte_size)) == 0) {
    mapping = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  close(fd);
  if (mapping == MAP_FAILED) {
    shm_unlink(key.c_str());
    return Status::Internal("cannot size or map shared memory object '" + key + "': " + std::strerror(error));
  }
  return std::unique_ptr<SharedMemoryRegion>(new SharedMemoryRegion(key, static_cast<uint8_t*>(mapping), byte_size));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(data_, size_);
  shm_unlink(key_.c_str());
}

}  // namespace inferd::client
