// filemap-thrash: each thread maps its own file MAP_SHARED read-only, reads one byte per
// page, unmaps: one round. Under a tight memcg this thrashes the page cache and, with
// munmap threads, contends mmap_lock (the "500 threads on 16MB files" seed).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "agent/sys/file_io.h"
#include "agent/sys/mapped_region.h"
#include "agent/sys/unique_fd.h"
#include "agent/workloads/workload.h"
#include "common/units.h"

namespace faultline::workloads {
namespace {

using sys::MappedRegion;
using sys::UniqueFd;

class FilemapThrash : public Workload {
 public:
  FilemapThrash(const ResolvedKnobs& knobs, const WorkloadOptions& options)
      : options_(options),
        threads_(static_cast<uint32_t>(knobs.at("threads").number)),
        munmap_threads_(static_cast<uint32_t>(knobs.at("munmap_threads").number)),
        file_size_(knobs.at("file_size").number),
        written_(knobs.at("file_fill").text == "written") {}

  bool Prepare(const std::atomic<bool>& interrupted, std::string* error) override {
    if (!EnoughDescriptors(error)) return false;
    if (written_ && !EnoughSpaceForWrittenFiles(error)) return false;
    for (uint32_t i = 0; i < threads_; ++i) {
      if (interrupted.load()) return Interrupted(error);
      UniqueFd fd = CreateUnlinkedFile("filemap", i, error);
      if (!fd) return false;
      if (::ftruncate(fd.get(), static_cast<off_t>(file_size_)) != 0) {
        *error = "ftruncate to " + FormatSize(file_size_) + " in " + options_.work_dir + ": " +
                 sys::ErrnoMessage(errno);
        return false;
      }
      if (written_ && !WriteOnce(fd.get(), interrupted, error)) return false;
      reader_files_.push_back(std::move(fd));
    }
    for (uint32_t i = 0; i < munmap_threads_; ++i) {
      UniqueFd fd = CreateUnlinkedFile("munmap", i, error);
      if (!fd) return false;
      if (::ftruncate(fd.get(), static_cast<off_t>(options_.page_size)) != 0) {
        *error = "ftruncate in " + options_.work_dir + ": " + sys::ErrnoMessage(errno);
        return false;
      }
      churn_files_.push_back(std::move(fd));
    }
    return true;
  }

  std::vector<ThreadGroup> ThreadGroups() override {
    std::vector<ThreadGroup> groups;
    groups.push_back({"", threads_,
                      [this](uint32_t index, RoundCounter& counter, const std::atomic<bool>& stop,
                             std::string* error) {
                        return ReadLoop(reader_files_[index].get(), counter, stop, error);
                      }});
    if (munmap_threads_ > 0) {
      groups.push_back({"munmap_rounds", munmap_threads_,
                        [this](uint32_t index, RoundCounter& counter, const std::atomic<bool>& stop,
                               std::string* error) {
                          return ChurnLoop(churn_files_[index].get(), counter, stop, error);
                        }});
    }
    return groups;
  }

  void DescribeEnvironment(std::map<std::string, std::string>* environment) const override {
    (*environment)["work_dir"] = options_.work_dir;
  }

 private:
  static bool Interrupted(std::string* error) {
    *error = "interrupted";
    return false;
  }

  // The file is unlinked as soon as it is open: the mapping keeps the inode alive, and
  // nothing is left in the directory even if the workload is OOM-killed or SIGKILLed.
  UniqueFd CreateUnlinkedFile(const char* kind, uint32_t index, std::string* error) const {
    std::string path = options_.work_dir + "/faultline-" + kind + "-" + std::to_string(::getpid()) +
                       "-" + std::to_string(index) + ".dat";
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) {
      *error = "creating " + path + ": " + sys::ErrnoMessage(errno);
      return fd;
    }
    if (::unlink(path.c_str()) != 0) {
      *error = "unlinking " + path + ": " + sys::ErrnoMessage(errno);
      return UniqueFd();
    }
    return fd;
  }

  // One open file per thread: thousands of threads exceed the usual soft limit of 1024,
  // so raise it to the hard limit when needed.
  bool EnoughDescriptors(std::string* error) const {
    const rlim_t needed = static_cast<rlim_t>(threads_) + munmap_threads_ + 64;
    struct rlimit limit;
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return true;
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
      *error = std::to_string(threads_ + munmap_threads_) + " threads need " +
               std::to_string(needed) + " open files but RLIMIT_NOFILE's hard limit is " +
               std::to_string(limit.rlim_max);
      return false;
    }
    limit.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      *error =
          "raising RLIMIT_NOFILE to " + std::to_string(needed) + ": " + sys::ErrnoMessage(errno);
      return false;
    }
    return true;
  }

  bool EnoughSpaceForWrittenFiles(std::string* error) const {
    struct statvfs fs;
    if (::statvfs(options_.work_dir.c_str(), &fs) != 0) {
      *error = options_.work_dir + ": " + sys::ErrnoMessage(errno);
      return false;
    }
    const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    const uint64_t needed = file_size_ * threads_;
    if (needed > available) {
      *error = "file_fill=written needs " + FormatSize(needed) + " in " + options_.work_dir +
               " but only " + FormatSize(available) + " is free";
      return false;
    }
    return true;
  }

  // Writes non-zero data, then syncs: clean page cache can be dropped without writeback,
  // so the benchmark measures refaults rather than the disk's write speed.
  bool WriteOnce(int fd, const std::atomic<bool>& interrupted, std::string* error) const {
    std::vector<unsigned char> chunk(1 << 20);
    for (size_t i = 0; i < chunk.size(); ++i)
      chunk[i] = static_cast<unsigned char>(i * 131 + 7) | 1;
    for (uint64_t offset = 0; offset < file_size_;) {
      if (interrupted.load()) return Interrupted(error);
      size_t length = static_cast<size_t>(std::min<uint64_t>(chunk.size(), file_size_ - offset));
      ssize_t n = ::pwrite(fd, chunk.data(), length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = "writing a file in " + options_.work_dir + ": " + sys::ErrnoMessage(errno);
        return false;
      }
      offset += static_cast<uint64_t>(n);
    }
    if (::fdatasync(fd) != 0) {
      *error = "fdatasync in " + options_.work_dir + ": " + sys::ErrnoMessage(errno);
      return false;
    }
    return true;
  }

  // Out of line: a profile's user frame names the loop (user_symbols.h).
  [[gnu::noinline]] bool ReadLoop(int fd, RoundCounter& counter, const std::atomic<bool>& stop,
                                  std::string* error) const {
    const size_t length = static_cast<size_t>(file_size_);
    const size_t step = options_.page_size;
    unsigned sum = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      int map_errno = 0;
      MappedRegion map = MappedRegion::Map(length, PROT_READ, MAP_SHARED, fd, 0, &map_errno);
      if (!map.valid()) {
        *error = "mmap of a " + FormatSize(file_size_) + " file: " + sys::ErrnoMessage(map_errno);
        return false;
      }
      const volatile unsigned char* bytes = map.data();
      for (size_t offset = 0; offset < length; offset += step) sum += bytes[offset];
      map.Unmap();
      counter.AddPages((length + step - 1) / step);
      counter.Increment();
    }
    sink_.store(sum, std::memory_order_relaxed);
    return true;
  }

  // Map and unmap without touching: each call takes mmap_lock for write.
  [[gnu::noinline]] bool ChurnLoop(int fd, RoundCounter& counter, const std::atomic<bool>& stop,
                                   std::string* error) const {
    while (!stop.load(std::memory_order_relaxed)) {
      int map_errno = 0;
      MappedRegion map =
          MappedRegion::Map(options_.page_size, PROT_READ, MAP_SHARED, fd, 0, &map_errno);
      if (!map.valid()) {
        *error = "mmap (munmap thread): " + sys::ErrnoMessage(map_errno);
        return false;
      }
      map.Unmap();
      counter.Increment();
    }
    return true;
  }

  WorkloadOptions options_;
  uint32_t threads_;
  uint32_t munmap_threads_;
  uint64_t file_size_;
  bool written_;
  std::vector<UniqueFd> reader_files_;
  std::vector<UniqueFd> churn_files_;
  // Keeps the page reads from being optimised away.
  static inline std::atomic<unsigned> sink_{0};
};

}  // namespace

std::unique_ptr<Workload> MakeFilemapThrash(const ResolvedKnobs& knobs,
                                            const WorkloadOptions& options) {
  return std::make_unique<FilemapThrash>(knobs, options);
}

}  // namespace faultline::workloads
