#pragma once
// The benchmark harness (will-it-scale style): it owns the threads, the stop flag, the
// warm-up, per-thread round counters on their own cache lines, and the per-second sampling
// on absolute deadlines. Workloads only supply thread bodies.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace faultline::workloads {

// 128 bytes, not 64: some arm64 cores have 128-byte lines and x86's adjacent-line
// prefetcher pulls pairs of 64-byte lines, either of which would make neighbouring
// counters share traffic and slow the very threads being measured.
inline constexpr size_t kCounterAlignment = 128;

// A round is the benchmark's unit (one pass over a region or a file). Pages count the
// progress inside rounds: a swap-in reader pass over 64M under pageout pressure can take
// longer than a measured second, so rounds alone can read 0 while work was done.
struct alignas(kCounterAlignment) RoundCounter {
  std::atomic<uint64_t> rounds{0};
  std::atomic<uint64_t> pages{0};

  // One writer per counter, so a plain load+store is enough: no locked RMW in hot loops.
  void Increment() {
    rounds.store(rounds.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void AddPages(uint64_t n) {
    pages.store(pages.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t Read() const { return rounds.load(std::memory_order_relaxed); }
  uint64_t ReadPages() const { return pages.load(std::memory_order_relaxed); }
};

// Fewer completed rounds than this in the measured interval: rounds/s is quantised too
// coarsely to compare (one round more or less moves it by more than 20%); pages/s is the
// measure then.
inline constexpr uint64_t kMinRoundsToCompare = 5;

// A thread body loops until `stop` is set, calling counter.Increment() per round. It returns
// false with *error set on a failure that must abort the run (e.g. mmap failing).
using ThreadBody = std::function<bool(uint32_t index, RoundCounter& counter,
                                      const std::atomic<bool>& stop, std::string* error)>;

struct ThreadGroup {
  std::string
      counter_name;  // "" = the benchmark's rounds; else a helper counter ("pageout_rounds")
  uint32_t threads = 0;
  ThreadBody body;
  // A helper that reports its progress in pages too (AddPages) names that counter here
  // ("pageout_pages"): a pass can outlast the measured interval, its pages cannot.
  std::string pages_counter_name = {};
};

// Time seam (Envoy's TimeSource idea): the real one uses CLOCK_MONOTONIC and
// clock_nanosleep(TIMER_ABSTIME), tests use a scripted one.
class MonotonicClock {
 public:
  virtual ~MonotonicClock() = default;
  virtual std::chrono::nanoseconds Now() = 0;
  // Sleeps until the absolute `deadline`. Returns false if interrupted (SIGTERM/SIGINT).
  virtual bool SleepUntil(std::chrono::nanoseconds deadline) = 0;
};

class RealMonotonicClock : public MonotonicClock {
 public:
  // `interrupted` is set by the caller's signal handler; the sleep returns early on EINTR
  // when it is set.
  explicit RealMonotonicClock(const std::atomic<bool>* interrupted) : interrupted_(interrupted) {}
  std::chrono::nanoseconds Now() override;
  bool SleepUntil(std::chrono::nanoseconds deadline) override;

 private:
  const std::atomic<bool>* interrupted_;
};

struct Sample {
  uint32_t second = 0;  // 1-based
  uint64_t rounds = 0;
  uint64_t pages = 0;  // pages touched by the benchmark's threads in that second
};

struct Progress {
  uint64_t rounds = 0;
  uint64_t pages = 0;
};

struct SamplingPlan {
  std::chrono::milliseconds warmup{0};
  uint32_t seconds = 1;
};

struct SamplingHooks {
  std::function<Progress()> read_progress;    // cumulative benchmark rounds and pages
  std::function<bool()> should_abort;         // a worker failed
  std::function<void()> measurement_started;  // right after the baseline read
  std::function<void(uint32_t second, uint64_t measured_rounds)> second_done;
  std::function<void()> measurement_ended;  // right after the last read
};

struct SamplingOutcome {
  enum class End { kCompleted, kInterrupted, kAborted } end = End::kCompleted;
  std::vector<Sample> samples;
  uint64_t rounds = 0;                           // sum of samples
  uint64_t pages = 0;                            // sum of samples
  double throughput_rounds_per_second = 0;       // rounds / seconds
  double pages_per_second = 0;                   // pages / seconds
  bool too_coarse = false;                       // rounds < kMinRoundsToCompare
  std::chrono::nanoseconds measured_elapsed{0};  // actual clock time measured
};

// Warm-up, then one read per second on deadlines start+warmup+k s (absolute, so a late
// wake-up shortens the next sleep instead of drifting every later sample).
SamplingOutcome SampleRounds(MonotonicClock& clock, const SamplingPlan& plan,
                             const SamplingHooks& hooks);

// Converts cumulative readings (baseline, then one per second) to per-second samples.
std::vector<Sample> SamplesFromCumulative(Progress baseline,
                                          const std::vector<Progress>& cumulative);

struct HarnessResult {
  bool ok = false;
  bool interrupted = false;
  std::string error;
  SamplingOutcome sampling;
  std::map<std::string, uint64_t> helper_rounds;  // measured-interval deltas, by counter name
  std::map<std::string, uint64_t> helper_pages;   // the same for pages_counter_name
  uint64_t min_thread_rounds = 0;                 // over the benchmark's threads, measured interval
  uint64_t max_thread_rounds = 0;
  uint32_t threads_started = 0;
};

struct HarnessHooks {
  std::function<void()> threads_started;
  std::function<void()> measurement_started;
  std::function<void(uint32_t second, uint64_t measured_rounds)> second_done;
  std::function<void()> measurement_ended;
};

// Starts every group's threads (SIGINT/SIGTERM blocked in them so the sampling thread
// receives the signal), releases them together, samples, stops and joins them all.
HarnessResult RunHarness(const std::vector<ThreadGroup>& groups, const SamplingPlan& plan,
                         MonotonicClock& clock, const HarnessHooks& hooks);

}  // namespace faultline::workloads
