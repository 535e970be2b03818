#pragma once
// Move-only owner of an mmap()ed range. The workloads map and unmap in their hot loops, so
// this stays a thin inline wrapper: one mmap on Map(), one munmap on destruction.
#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <utility>

namespace faultline::sys {

class MappedRegion {
 public:
  MappedRegion() = default;
  MappedRegion(MappedRegion&& other) noexcept
      : address_(std::exchange(other.address_, nullptr)),
        length_(std::exchange(other.length_, 0)) {}
  MappedRegion& operator=(MappedRegion&& other) noexcept {
    if (this != &other) {
      Unmap();
      address_ = std::exchange(other.address_, nullptr);
      length_ = std::exchange(other.length_, 0);
    }
    return *this;
  }
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion() { Unmap(); }

  // Returns an invalid region and sets *error_number (errno) when mmap fails.
  static MappedRegion Map(size_t length, int protection, int flags, int fd, off_t offset,
                          int* error_number) {
    void* address = ::mmap(nullptr, length, protection, flags, fd, offset);
    if (address == MAP_FAILED) {
      if (error_number != nullptr) *error_number = errno;
      return MappedRegion();
    }
    return MappedRegion(static_cast<unsigned char*>(address), length);
  }

  static MappedRegion MapAnonymous(size_t length, int* error_number) {
    return Map(length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, error_number);
  }

  // Takes ownership of a range mapped by other means (e.g. MAP_FIXED into a reservation).
  static MappedRegion Adopt(unsigned char* address, size_t length) {
    return MappedRegion(address, length);
  }

  bool valid() const { return address_ != nullptr; }
  unsigned char* data() const { return address_; }
  size_t size() const { return length_; }

  // Returns 0 or the errno of munmap.
  int Unmap() {
    if (address_ == nullptr) return 0;
    int result = ::munmap(address_, length_) == 0 ? 0 : errno;
    address_ = nullptr;
    length_ = 0;
    return result;
  }

 private:
  MappedRegion(unsigned char* address, size_t length) : address_(address), length_(length) {}

  unsigned char* address_ = nullptr;
  size_t length_ = 0;
};

}  // namespace faultline::sys
