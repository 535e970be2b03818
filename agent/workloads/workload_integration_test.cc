// Runs the real faultline-workload binary. Touches real swap and cgroups, so "integration".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "agent/sys/cgroup.h"
#include "agent/sys/lock_waits.h"
#include "agent/sys/testing/cgroup_cleanup.h"
#include "agent/sys/testing/zram_swap.h"
#include "agent/sys/vmstat.h"
#include "agent/workloads/harness.h"
#include "common/benchmarks.h"

extern char** environ;

namespace faultline::workloads {
namespace {

struct ProcessResult {
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
};

// Spawns the workload with stdout, stderr and a progress pipe on fd 3, reads all three to
// EOF, and calls on_progress with each chunk of progress text (for signalling tests).
ProcessResult RunWorkload(std::vector<std::string> args,
                          const std::function<void(pid_t, const std::string&)>& on_progress = {}) {
  int out[2], err[2], progress[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(progress, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_adddup2(&actions, progress[1], 3);
  args.insert(args.begin(), FAULTLINE_WORKLOAD_BINARY);
  args.push_back("--progress-fd");
  args.push_back("3");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  ::close(progress[1]);
  ProcessResult result;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    return result;
  }
  struct pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {progress[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 3;
  while (open_fds > 0) {
    ::poll(fds, 3, -1);
    for (int i = 0; i < 3; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i < 2) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (on_progress) {
        on_progress(pid, std::string(buffer, static_cast<size_t>(n)));
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/faultline-workload-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_;
};

void ExpectConsistentResult(const nlohmann::json& result, uint32_t seconds) {
  ASSERT_EQ(result["samples"].size(), seconds);
  uint64_t sum = 0, page_sum = 0;
  for (uint32_t i = 0; i < seconds; ++i) {
    EXPECT_EQ(result["samples"][i]["second"], i + 1);
    sum += result["samples"][i]["rounds"].get<uint64_t>();
    page_sum += result["samples"][i]["pages"].get<uint64_t>();
  }
  const uint64_t rounds = result["rounds"].get<uint64_t>();
  const uint64_t pages = result["pages"].get<uint64_t>();
  // A slow pass may complete no round within the window (a real outcome on a busy board);
  // pages always move, and few rounds are flagged rather than compared.
  EXPECT_GT(pages, 0u);
  EXPECT_EQ(sum, rounds);
  EXPECT_EQ(page_sum, pages);
  EXPECT_EQ(result["too_coarse"].get<bool>(), rounds < kMinRoundsToCompare);
  EXPECT_NEAR(result["pages_per_second"].get<double>(), static_cast<double>(pages) / seconds, 1e-6);
  EXPECT_EQ(result["duration_seconds"], seconds);
  EXPECT_NEAR(result["throughput_rounds_per_second"].get<double>(),
              static_cast<double>(rounds) / seconds, 1e-9);
  EXPECT_EQ(result["environment"]["page_size"], std::to_string(::sysconf(_SC_PAGESIZE)));
  EXPECT_TRUE(result["counters"].contains("vmstat.pgfault"));
  EXPECT_TRUE(result["counters"].contains("rusage.minflt"));
}

TEST(WorkloadBinary, FilemapThrashPrintsResultAndLeavesNoFiles) {
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "4M", "--duration",
                          "2s", "--dir", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["benchmark"], "filemap-thrash");
  ExpectConsistentResult(result, 2);
  EXPECT_EQ(result["params"]["threads"], "2");
  EXPECT_EQ(result["params"]["file_size"], "4M");
  EXPECT_EQ(result["params"]["file_fill"], "sparse");
  EXPECT_EQ(result["warmup_seconds"], 0);
  EXPECT_EQ(result["environment"]["work_dir"], dir.path());
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, FilemapThrashWrittenWithMunmapChurn) {
  TempDir dir;
  auto run =
      RunWorkload({"filemap-thrash", "--threads", "1", "--file-size", "1M", "--file_fill",
                   "written", "--munmap-threads", "1", "--duration", "1s", "--dir", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  EXPECT_GT(result["counters"]["munmap_rounds"].get<double>(), 0);
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, BadKnobIsAUsageError) {
  auto run = RunWorkload({"filemap-thrash", "--threads", "0", "--duration", "1s"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--threads"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("between 1 and 4096"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(WorkloadBinary, SigtermInterruptsAndCleansUp) {
  TempDir dir;
  bool signalled = false;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "1M", "--duration",
                          "600s", "--dir", dir.path()},
                         [&](pid_t pid, const std::string& progress) {
                           if (!signalled && progress.find("phase=started") != std::string::npos) {
                             ::kill(pid, SIGTERM);
                             signalled = true;
                           }
                         });
  EXPECT_TRUE(signalled);
  EXPECT_EQ(run.exit_code, 4);
  EXPECT_NE(run.err.find("interrupted"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, OwnMemcgWhenLimitsGiven) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "4M", "--duration",
                          "1s", "--dir", dir.path(), "--memory-max", "256M", "--memory-high",
                          "192M", "--swap-max", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  const auto& env = result["environment"];
  ASSERT_TRUE(env.contains("memcg.path")) << env.dump();
  EXPECT_EQ(env["memcg.version"], sys::CgroupVersionName(backend->version));
  EXPECT_EQ(env["memcg.current"], env["memcg.path"]);
  if (backend->version == sys::CgroupVersion::kV1) {
    EXPECT_EQ(env["memcg.memory_max"], "memory.limit_in_bytes=268435456");
    EXPECT_EQ(env["memcg.memory_high"],
              "memory.soft_limit_in_bytes=201326592 (v1 has no memory.high)");
  } else {
    EXPECT_EQ(env["memcg.memory_max"], "memory.max=268435456");
  }
  EXPECT_FALSE(std::filesystem::exists(env["memcg.path"].get<std::string>()));
}

TEST(WorkloadBinary, SwapInRefusesWithoutSwap) {
  if (sys::HasSwap()) GTEST_SKIP() << "swap is active on this host; refusal cannot be observed";
  auto run = RunWorkload({"swap-in", "--duration", "1s"});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.err.find("no swap"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(WorkloadBinary, SwapInRunsWithZramSwap) {
  FAULTLINE_ZRAM_SWAP_OR_SKIP(swap, 512ull << 20);
  auto run = RunWorkload({"swap-in", "--region-size", "64M", "--readers", "2", "--pageout-threads",
                          "1", "--fill", "nonzero", "--duration", "2s"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["benchmark"], "swap-in");
  ExpectConsistentResult(result, 2);
  EXPECT_EQ(result["environment"]["swap_present"], "true");
  // Pages, not passes: a pass over 64M can outlast the 2 s window on a loaded machine.
  EXPECT_GT(result["counters"]["pageout_pages"].get<double>(), 0) << result["counters"].dump();
  EXPECT_TRUE(result["counters"].contains("pageout_rounds"));  // passes, still reported
  EXPECT_GT(result["counters"]["vmstat.pswpout"].get<double>(), 0);
}

TEST(WorkloadBinary, MmapWriterPressureRunsWithZramSwap) {
  FAULTLINE_ZRAM_SWAP_OR_SKIP(swap, 512ull << 20);
  auto run = RunWorkload({"mmap-writer-pressure", "--region-size", "32M", "--readers", "2",
                          "--writers", "2", "--duration", "1s"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  EXPECT_GT(result["counters"]["writer_rounds"].get<double>(), 0);
  EXPECT_EQ(result["params"]["writers"], "2");
  EXPECT_EQ(result["params"]["fill"], "nonzero");
}

// The counters and fingerprint the issue asks of every run.
void ExpectIssueCountersAndEnvironment(const nlohmann::json& result) {
  const auto& c = result["counters"];
  // Every run faults and uses CPU; the other counters appear when they moved.
  for (const char* key :
       {"vmstat.pgfault", "cpu_seconds", "rusage.utime_seconds", "rusage.stime_seconds",
        "rusage.minflt", "rusage.nvcsw", "rusage.nivcsw"}) {
    EXPECT_TRUE(c.contains(key)) << key << " missing in " << c.dump();
  }
  for (const auto& [key, value] : c.items()) {
    EXPECT_FALSE(key.rfind("vmstat.nr_", 0) == 0 && key != "vmstat.nr_dirtied" &&
                 key != "vmstat.nr_written")
        << "a level, not a counter: " << key;
    if (key.rfind("vmstat.", 0) == 0) {
      EXPECT_GT(value.get<double>(), 0) << key;
    }
  }
  if (sys::ReadMemoryPressure()) {
    EXPECT_TRUE(c.contains("psi.memory_some_us")) << c.dump();
    EXPECT_TRUE(c.contains("psi.memory_full_us")) << c.dump();
  }
  const auto& e = result["environment"];
  EXPECT_GT(std::stoi(result["environment"]["vmstat.keys"].get<std::string>()), 50);
  for (const char* key : {"kernel.release", "kernel.version", "kernel.cmdline", "swap.devices",
                          "cpu.model", "cpu.count", "cpu.online", "cpu.governor", "page_size",
                          "memory.total_bytes", "cgroup.version"}) {
    EXPECT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
  }
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    for (const char* key : {"thp.enabled", "thp.defrag", "thp.shmem_enabled"}) {
      EXPECT_TRUE(e.contains(key)) << key;
    }
  }
  if (std::filesystem::exists("/proc/config.gz")) {
    EXPECT_TRUE(e.contains("kernel.config_fnv1a64")) << e.dump();
  }
}

TEST(WorkloadBinary, SwapInShowsPswpinOnZram) {
  FAULTLINE_ZRAM_SWAP_OR_SKIP(swap, 512ull << 20);
  auto run = RunWorkload({"--preset", "v2-swap-in-small", "--fill", "nonzero", "--duration", "2s"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 2);
  ExpectIssueCountersAndEnvironment(result);
  EXPECT_EQ(result["params"]["preset"], "v2-swap-in-small");
  EXPECT_EQ(result["environment"]["preset"], "v2-swap-in-small");
  EXPECT_GT(result["counters"]["vmstat.pswpin"].get<double>(), 0) << result["counters"].dump();
  EXPECT_GT(result["counters"]["pageout_pages"].get<double>(), 0);
  EXPECT_NE(result["environment"]["swap.devices"].get<std::string>().find("/dev/zram0"),
            std::string::npos);
  EXPECT_TRUE(result["environment"].contains("swap.zram0.comp_algorithm"));
}

TEST(WorkloadBinary, FilemapThrashUnderATightMemcgFaultsMajorOrRefaults) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  // 4 x 16M files of page cache in a 32M memcg: every pass re-reads evicted pages.
  auto run = RunWorkload({"filemap-thrash", "--threads", "4", "--file-size", "16M", "--file-fill",
                          "written", "--duration", "2s", "--dir", dir.path(), "--memory-max", "32M",
                          "--swap-max", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 2);
  ExpectIssueCountersAndEnvironment(result);
  const auto& c = result["counters"];
  const double evidence = c.value("vmstat.pgmajfault", 0.0) +
                          c.value("vmstat.workingset_refault_file", 0.0) +
                          c.value("memcg.pgmajfault", 0.0);
  EXPECT_GT(evidence, 0) << c.dump();
  // The memcg's own counters (memory.stat) saw the thrashing. memory.events/failcnt deltas
  // appear only when they moved within the measured seconds (on v1 failcnt may stay put once
  // the cache has settled at the limit in the warm-up); the agent adds their totals.
  EXPECT_GT(c.value("memcg.workingset_refault_file", 0.0) + c.value("memcg.pgmajfault", 0.0), 0)
      << c.dump();
  EXPECT_TRUE(c.contains("memcg.pgfault")) << c.dump();  // memory.stat's own counters
  EXPECT_TRUE(c.contains("memcg.peak_bytes")) << c.dump();
  EXPECT_LE(c["memcg.peak_bytes"].get<double>(), 32.0 * 1024 * 1024);
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, PresetRunsWithItsOwnMemcgByHand) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  auto run = RunWorkload({"--preset", "v5-filemap-small", "--duration", "1s", "--dir", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  EXPECT_EQ(result["benchmark"], "filemap-thrash");
  EXPECT_EQ(result["params"]["threads"], "4");  // the first value of the preset's matrix
  EXPECT_EQ(result["params"]["munmap_threads"], "1");
  EXPECT_GT(result["counters"]["munmap_rounds"].get<double>(), 0);
  EXPECT_TRUE(result["environment"].contains("memcg.memory_max")) << result["environment"].dump();
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, ShmemFolioFaultReportsIterationsAndNanoseconds) {
  for (const char* vma : {"64K", "32K"}) {
    SCOPED_TRACE(vma);
    std::vector<std::string> args = {"shmem-folio-fault", "--vma-size", vma, "--duration", "1s"};
    if (::geteuid() != 0) {
      args.push_back("--thp");
      args.push_back("advise");  // force writes sysfs
    }
    auto run = RunWorkload(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto result = nlohmann::json::parse(run.out);
    ExpectConsistentResult(result, 1);
    ExpectIssueCountersAndEnvironment(result);
    const auto& c = result["counters"];
    ASSERT_TRUE(c.contains("ns_per_iteration")) << c.dump();
    ASSERT_TRUE(c.contains("fault_ns_per_iteration")) << c.dump();
    EXPECT_GT(c["fault_ns_per_iteration"].get<double>(), 0);
    EXPECT_LE(c["fault_ns_per_iteration"].get<double>(), c["ns_per_iteration"].get<double>());
    // Every iteration faults at least once (MADV_DONTNEED zapped the page table).
    EXPECT_GE(c["vmstat.pgfault"].get<double>(), result["rounds"].get<double>());
    const auto& e = result["environment"];
    EXPECT_EQ(e["shmem.vma_bytes"], std::to_string(std::stoul(vma) * 1024));
    if (::geteuid() == 0 && e.contains("shmem.enabled_path")) {
      EXPECT_EQ(e["shmem.pmd_folio"], "true") << e.dump();
      // The forced setting was put back.
      std::ifstream setting(e["shmem.enabled_path"].get<std::string>());
      std::string text((std::istreambuf_iterator<char>(setting)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find("[" + e["shmem.enabled_before_force"].get<std::string>() + "]"),
                std::string::npos)
          << text;
    }
  }
}

// Every -small preset runs for real (1 s each; swap ones on a zram device the workload
// provisions and removes itself).
TEST(WorkloadBinary, EverySmallPresetRuns) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  if (!std::filesystem::exists("/sys/block/zram0/disksize") || sys::HasSwap()) {
    GTEST_SKIP() << "needs an idle /dev/zram0 and no active swap";
  }
  TempDir dir;
  for (const auto& preset : Presets()) {
    if (!preset.small) continue;
    SCOPED_TRACE(preset.name);
    auto run = RunWorkload({"--preset", preset.name, "--duration", "1s", "--warmup", "0s", "--dir",
                            dir.path(), "--zram-swap", "512M"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto result = nlohmann::json::parse(run.out);
    ExpectConsistentResult(result, 1);
    EXPECT_EQ(result["benchmark"], preset.benchmark);
    EXPECT_EQ(result["params"]["preset"], preset.name);
    if (!preset.memcg.memory_max.empty()) {
      EXPECT_TRUE(result["environment"].contains("memcg.memory_max"));
    }
    EXPECT_FALSE(sys::HasSwap()) << "the zram swap device was not removed";
  }
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, SizesAboveTheBoardsRamFailBeforeAllocating) {
  // Twice this host's RAM, whatever the host (never a fixed size that a big host has).
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib && key != "MemTotal:") meminfo.ignore(256, '\n');
  ASSERT_EQ(key, "MemTotal:");
  const std::string twice_ram = std::to_string(kib / (1 << 20) * 2 + 2) + "G";
  auto run = RunWorkload({"swap-in", "--region-size", twice_ram, "--duration", "1s"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--region_size: must not exceed the board's RAM"), std::string::npos)
      << run.err;
}

// --events: tracepoint counts per run. filemap-thrash's rounds each map and unmap a file
// (mmap_lock for write twice); faults under the per-VMA lock take no mmap_lock, except the
// retries that fall back to it. A munmap thread's loop takes mmap_lock all the time: per
// round, the count grows by two orders of magnitude (measured on a 2-core VM, 10 runs each:
// 6-11 per round without, 1,400-9,700 with munmap churn). 5x cannot fail by chance.
TEST(WorkloadBinary, MmapLockCountPerRoundGrowsWithMunmapChurn) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  double per_round[2] = {0, 0};
  for (int munmap_threads : {0, 1}) {
    SCOPED_TRACE(munmap_threads);
    // 2 x 16M of written page cache in a 24M memcg: the readers thrash, as in the studies.
    auto run =
        RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "16M", "--file-fill",
                     "written", "--munmap-threads", std::to_string(munmap_threads), "--duration",
                     "2s", "--dir", dir.path(), "--memory-max", "24M", "--swap-max", "0",
                     "--events", "mmap_lock:mmap_lock_start_locking,sw:page-faults"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto result = nlohmann::json::parse(run.out);
    ExpectConsistentResult(result, 2);
    const auto& c = result["counters"];
    const auto& e = result["environment"];
    ASSERT_TRUE(c.contains("perf.mmap_lock:mmap_lock_start_locking")) << c.dump();
    ASSERT_TRUE(c.contains("perf.sw:page-faults")) << c.dump();
    // Every thread of the process: the benchmark's, the munmap thread, the sampler.
    EXPECT_EQ(e["perf.threads"], std::to_string(2 + munmap_threads + 1)) << e.dump();
    EXPECT_FALSE(e.contains("perf.scaled.mmap_lock:mmap_lock_start_locking")) << e.dump();
    const double count = c["perf.mmap_lock:mmap_lock_start_locking"].get<double>();
    const double rounds = result["rounds"].get<double>();
    EXPECT_GE(count, rounds);  // at least the mmap of each round
    // The process's own faults, as getrusage counts them over (almost) the same interval.
    const double faults = c["perf.sw:page-faults"].get<double>();
    const double rusage_faults = c.value("rusage.minflt", 0.0) + c.value("rusage.majflt", 0.0);
    EXPECT_GT(faults, 0.8 * rusage_faults) << c.dump();
    EXPECT_LT(faults, 1.2 * rusage_faults) << c.dump();
    per_round[munmap_threads] = count / std::max(1.0, rounds);
    std::cout << "munmap_threads=" << munmap_threads << ": rounds " << rounds
              << ", mmap_lock_start_locking " << count << " (" << per_round[munmap_threads]
              << " per round)\n";
  }
  EXPECT_GE(per_round[1], 5 * per_round[0]);
  EXPECT_TRUE(dir.empty());
}

// --mmap-lock-waits on filemap-thrash under memcg pressure (faults retry under mmap_lock
// for read): a munmap thread multiplies the write acquisitions and makes the readers wait
// longer, and where the kernel has lock:contention_* readers are truly contended. Ratios,
// not times (measured here: writes x1500-2200, read wait x10-18, contended reads 0 -> 154).
TEST(WorkloadBinary, MmapLockWaitsGrowWithMunmapChurn) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  double writes[2] = {0, 0};
  double read_wait_us[2] = {0, 0};
  double read_contended[2] = {0, 0};
  bool contention_traced = false;
  for (int munmap_threads : {0, 1}) {
    SCOPED_TRACE(munmap_threads);
    auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "16M", "--file-fill",
                            "written", "--munmap-threads", std::to_string(munmap_threads),
                            "--duration", "2s", "--dir", dir.path(), "--memory-max", "24M",
                            "--swap-max", "0", "--mmap-lock-waits"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto result = nlohmann::json::parse(run.out);
    const auto& c = result["counters"];
    const auto& e = result["environment"];
    if (e.contains("mmap_lock_wait.unsupported")) {
      GTEST_SKIP() << "this kernel: " << e["mmap_lock_wait.unsupported"];
    }
    EXPECT_EQ(e["mmap_lock_wait.threads"], std::to_string(2 + munmap_threads + 1)) << e.dump();
    for (const char* side : {"read", "write"}) {
      const std::string p = std::string("mmap_lock_wait.") + side + ".";
      double in_decades = 0;
      for (size_t d = 0; d < sys::kWaitDecades; ++d) {
        in_decades += c[p + sys::WaitDecadeCounter(d)].get<double>();
      }
      EXPECT_EQ(in_decades, c[p + "count"].get<double>()) << c.dump();
    }
    const double events = c["mmap_lock_wait.read.count"].get<double>() +
                          c["mmap_lock_wait.write.count"].get<double>();
    EXPECT_LE(c["mmap_lock_wait.lost_records"].get<double>(), 0.01 * events) << c.dump();
    writes[munmap_threads] = c["mmap_lock_wait.write.count"].get<double>();
    read_wait_us[munmap_threads] = c["mmap_lock_wait.read.total_us"].get<double>();
    std::cout << "munmap_threads=" << munmap_threads << ": rounds " << result["rounds"]
              << ", write acquisitions " << writes[munmap_threads] << ", read wait "
              << read_wait_us[munmap_threads] << " us, lost " << c["mmap_lock_wait.lost_records"]
              << "\n";
    // True contention (lock:contention_begin/end) is a part of the waits.
    if (e.contains("mmap_lock_contention.unsupported")) {
      std::cout << "  contention not traced: " << e["mmap_lock_contention.unsupported"] << "\n";
      continue;
    }
    contention_traced = true;
    for (const char* side : {"read", "write"}) {
      const std::string p = std::string("mmap_lock_contention.") + side + ".";
      const std::string w = std::string("mmap_lock_wait.") + side + ".";
      EXPECT_LE(c[p + "count"].get<double>(), c[w + "count"].get<double>()) << c.dump();
      EXPECT_LE(c[p + "total_us"].get<double>(), c[w + "total_us"].get<double>()) << c.dump();
      EXPECT_LE(c[p + "max_us"].get<double>(), c[p + "total_us"].get<double>()) << c.dump();
    }
    read_contended[munmap_threads] = c["mmap_lock_contention.read.count"].get<double>();
    std::cout << "  contended: read " << read_contended[munmap_threads] << " ("
              << c["mmap_lock_contention.read.total_us"] << " us), write "
              << c["mmap_lock_contention.write.count"] << " ("
              << c["mmap_lock_contention.write.total_us"] << " us)\n";
  }
  EXPECT_GE(writes[1], 20 * std::max(1.0, writes[0]));
  EXPECT_GE(read_wait_us[1], 2 * read_wait_us[0]);
  if (contention_traced) {
    // Readers queue behind the munmap thread's write lock (measured alone: 0 -> 154 in 2 s;
    // under a load of 4, 0 -> 5: how many depends on the CPU the munmap thread gets, so the
    // bound is that they appear and grow, not a count).
    EXPECT_GE(read_contended[1], 1);
    EXPECT_GE(read_contended[1], 5 * read_contended[0]);
  }
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, RefusedEventsAreUsageErrorsNamingTheFlagAndTheEvent) {
  TempDir dir;
  auto unknown =
      RunWorkload({"filemap-thrash", "--threads", "1", "--file-size", "1M", "--duration", "1s",
                   "--dir", dir.path(), "--events", "sw:page-faults,sw:pagefaults"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("--events: 'sw:pagefaults': unknown software event"),
            std::string::npos)
      << unknown.err;
  if (::geteuid() != 0) GTEST_SKIP() << "tracepoint look-up needs root (tracefs)";
  auto missing =
      RunWorkload({"filemap-thrash", "--threads", "1", "--file-size", "1M", "--duration", "1s",
                   "--dir", dir.path(), "--events", "mmap_lock:no_such_tracepoint"});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("--events: 'mmap_lock:no_such_tracepoint': no tracepoint "
                             "mmap_lock:no_such_tracepoint on this kernel"),
            std::string::npos)
      << missing.err;
  EXPECT_TRUE(missing.out.empty());
  EXPECT_TRUE(dir.empty());  // no tracefs mount point left behind
}

TEST(WorkloadBinary, HardwareEventsWithoutAPmuAreReportedNotFatal) {
  if (::geteuid() != 0) GTEST_SKIP() << "perf counters of every thread: run as root";
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "1", "--file-size", "1M", "--duration",
                          "1s", "--dir", dir.path(), "--events", "hw:cycles,sw:context-switches"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  const auto& c = result["counters"];
  const auto& e = result["environment"];
  EXPECT_TRUE(c.contains("perf.sw:context-switches")) << c.dump();
  if (e.contains("perf.unsupported.hw:cycles")) {  // no PMU (qemu TCG, this VM)
    EXPECT_FALSE(c.contains("perf.hw:cycles"));
    EXPECT_NE(e["perf.unsupported.hw:cycles"].get<std::string>().find("no hardware PMU"),
              std::string::npos)
        << e.dump();
  } else {
    EXPECT_GT(c["perf.hw:cycles"].get<double>(), 0) << c.dump();
  }
  EXPECT_TRUE(dir.empty());
}

FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT();

}  // namespace
}  // namespace faultline::workloads

namespace faultline::workloads {
namespace {

// --profile-hz on filemap-thrash under memcg pressure: the samples name the kernel's fault
// path, and the folded stacks come back; the run's memcg (24M) does not pay for the
// kernel's symbol table (named after the interval from the symbols needed only).
TEST(WorkloadBinary, ProfileNamesTheKernelFaultPath) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "16M", "--file-fill",
                          "written", "--duration", "2s", "--dir", dir.path(), "--memory-max", "24M",
                          "--swap-max", "0", "--profile-hz", "999"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  const auto& c = result["counters"];
  const auto& e = result["environment"];
  if (e.contains("profile.unsupported"))
    GTEST_SKIP() << "this kernel: " << e["profile.unsupported"];
  // The cpu-clock samples CPU time: 999 a second of it, fewer when the timer lags (a loaded
  // VM gave 0.61 of them); a quarter of them, whatever the machine's load.
  EXPECT_GE(c["profile.samples"].get<double>(), 0.25 * 999 * c["cpu_seconds"].get<double>())
      << c.dump();
  EXPECT_GE(c["profile.samples"].get<double>(), 100) << c.dump();
  EXPECT_GT(c.value("profile.total.handle_mm_fault", 0.0),
            0.05 * c["profile.samples"].get<double>())
      << c.dump();
  EXPECT_LE(c["profile.lost"].get<double>(), 0.01 * c["profile.samples"].get<double>());
  // A result of their own, not an environment fact.
  EXPECT_FALSE(e.contains("profile.folded")) << e.dump();
  const std::string folded = result["folded_stacks"].get<std::string>();
  EXPECT_NE(folded.find(";handle_mm_fault;"), std::string::npos) << folded.substr(0, 2000);
  // The user leaf named: the reader's own code faults the file's pages in.
  bool reader_faults = false;
  for (size_t at = 0; at < folded.size();) {
    const size_t end = std::min(folded.find('\n', at), folded.size());
    const std::string line = folded.substr(at, end - at);
    at = end + 1;
    reader_faults = reader_faults || (line.rfind("faultline-workload:", 0) == 0 &&
                                      line.find(";handle_mm_fault") != std::string::npos);
  }
  EXPECT_TRUE(reader_faults) << folded.substr(0, 2000);
  EXPECT_EQ(e["profile.threads"], "3") << "two readers and the harness's thread";
}

}  // namespace
}  // namespace faultline::workloads
