// What the harness adds to one benchmark round, against a bare loop doing the same work.
//  - BM_Round/bare: the loop as a seed reproducer writes it (check a stop flag, do the
//    work, count in a local variable);
//  - BM_Round/harness: the harness's loop (check the stop flag, do the work,
//    RoundCounter::Increment on the thread's own cache line);
//  - work: none (the pure overhead), and a real round in miniature (map a 64K file
//    MAP_SHARED read-only, read one byte per page, unmap — filemap-thrash's round);
//  - BM_HarnessRun: rounds per second through RunHarness itself (thread start-up,
//    sampling every second) vs the same body on a plain thread, both for 1 s;
//  - BM_CounterSnapshot: the counters read at the start and end of the measured interval
//    (/proc/vmstat, memory.stat, rusage, PSI), and BM_SampleRead: the per-second read of
//    every thread's counter (500 threads, the seed's count).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "agent/workloads/harness.h"
#include "agent/workloads/result.h"

namespace faultline::workloads {
namespace {

constexpr size_t kFileBytes = 64 * 1024;

int OpenTestFile() {
  char path[] = "/tmp/faultline-bench-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) std::abort();
  ::unlink(path);
  if (::ftruncate(fd, kFileBytes) != 0) std::abort();
  return fd;
}

inline unsigned MapTouchUnmap(int fd, size_t page) {
  auto* p = static_cast<const volatile unsigned char*>(
      ::mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0));
  unsigned sum = 0;
  for (size_t off = 0; off < kFileBytes; off += page) sum += p[off];
  ::munmap(const_cast<unsigned char*>(p), kFileBytes);
  return sum;
}

// Arg 0: 0 = bare, 1 = harness counter. Arg 1: 0 = no work, 1 = a filemap round.
void BM_Round(benchmark::State& state) {
  const bool counted = state.range(0) == 1;
  const bool filemap = state.range(1) == 1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const int fd = filemap ? OpenTestFile() : -1;
  std::atomic<bool> stop{false};
  RoundCounter counter;
  uint64_t local = 0;
  unsigned sum = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark loop idiom
    if (stop.load(std::memory_order_relaxed)) break;
    if (filemap) sum += MapTouchUnmap(fd, page);
    benchmark::ClobberMemory();
    if (counted) {
      counter.Increment();
    } else {
      ++local;
    }
  }
  benchmark::DoNotOptimize(sum);
  benchmark::DoNotOptimize(local);
  benchmark::DoNotOptimize(counter.Read());
  if (fd >= 0) ::close(fd);
  state.SetLabel(std::string(counted ? "harness" : "bare") +
                 (filemap ? ", filemap round" : ", empty round"));
}
BENCHMARK(BM_Round)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"harness", "filemap"});

// One second of filemap rounds on one thread: through RunHarness (counter, sampling
// thread, per-second reads) vs a plain std::thread with a local count.
void BM_HarnessRun(benchmark::State& state) {
  const bool harness = state.range(0) == 1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const int fd = OpenTestFile();
  double rounds_per_second = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark loop idiom
    if (harness) {
      std::atomic<bool> never{false};
      RealMonotonicClock clock(&never);
      ThreadGroup group{
          "", 1, [&](uint32_t, RoundCounter& c, const std::atomic<bool>& stop, std::string*) {
            unsigned sum = 0;
            while (!stop.load(std::memory_order_relaxed)) {
              sum += MapTouchUnmap(fd, page);
              c.Increment();
            }
            benchmark::DoNotOptimize(sum);
            return true;
          }};
      SamplingPlan plan;
      plan.seconds = 1;
      HarnessResult r = RunHarness({group}, plan, clock, {});
      rounds_per_second = r.sampling.throughput_rounds_per_second;
    } else {
      std::atomic<bool> stop{false};
      uint64_t rounds = 0;
      std::thread worker([&] {
        unsigned sum = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          sum += MapTouchUnmap(fd, page);
          ++rounds;
        }
        benchmark::DoNotOptimize(sum);
      });
      std::this_thread::sleep_for(std::chrono::seconds(1));
      stop.store(true);
      worker.join();
      rounds_per_second = static_cast<double>(rounds);
    }
  }
  ::close(fd);
  state.counters["rounds_per_second"] = rounds_per_second;
  state.counters["ns_per_round"] = rounds_per_second > 0 ? 1e9 / rounds_per_second : 0;
  state.SetLabel(harness ? "RunHarness" : "bare thread");
}
BENCHMARK(BM_HarnessRun)
    ->Arg(0)
    ->Arg(1)
    ->ArgNames({"harness"})
    ->Iterations(1)
    ->Repetitions(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_CounterSnapshot(benchmark::State& state) {
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark loop idiom
    benchmark::DoNotOptimize(TakeCounterSnapshot("/sys/fs/cgroup/memory"));
  }
}
BENCHMARK(BM_CounterSnapshot)->Unit(benchmark::kMicrosecond);

void BM_SampleRead(benchmark::State& state) {
  std::vector<RoundCounter> counters(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark loop idiom
    uint64_t sum = 0;
    for (const auto& c : counters) sum += c.Read();
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_SampleRead)->Arg(500);

}  // namespace
}  // namespace faultline::workloads

BENCHMARK_MAIN();
