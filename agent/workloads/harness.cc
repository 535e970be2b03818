#include "agent/workloads/harness.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

namespace faultline::workloads {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

// Workers use little stack; a small fixed size keeps thousands of threads cheap (the seed
// runs 500) and independent of `ulimit -s`.
constexpr size_t kWorkerStackBytes = 256 * 1024;

class FirstFailure {
 public:
  void Record(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_.load(std::memory_order_relaxed)) message_ = std::move(message);
    failed_.store(true, std::memory_order_release);
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string message() {
    std::lock_guard<std::mutex> lock(mutex_);
    return message_;
  }

 private:
  std::mutex mutex_;
  std::atomic<bool> failed_{false};
  std::string message_;
};

struct WorkerContext {
  const ThreadBody* body = nullptr;
  uint32_t index = 0;
  RoundCounter* counter = nullptr;
  std::atomic<bool>* go = nullptr;
  std::atomic<bool>* stop = nullptr;
  FirstFailure* failure = nullptr;
};

void* WorkerMain(void* arg) {
  auto* context = static_cast<WorkerContext*>(arg);
  // Released together so warm-up starts when every thread exists, not while thousands are
  // still being created.
  context->go->wait(false, std::memory_order_acquire);
  // Every released body runs, even if stop is already set: bodies loop on `stop` anyway.
  std::string error;
  if (!(*context->body)(context->index, *context->counter, *context->stop, &error)) {
    context->failure->Record(error.empty() ? "a worker thread failed" : error);
    context->stop->store(true, std::memory_order_relaxed);
  }
  return nullptr;
}

timespec ToTimespec(nanoseconds t) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(t.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(t.count() % 1'000'000'000);
  return ts;
}

}  // namespace

nanoseconds RealMonotonicClock::Now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec);
}

bool RealMonotonicClock::SleepUntil(nanoseconds deadline) {
  const timespec ts = ToTimespec(deadline);
  for (;;) {
    if (interrupted_ != nullptr && interrupted_->load(std::memory_order_relaxed)) return false;
    int rc = ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    if (rc == 0) return true;
    if (rc != EINTR) return true;  // EINVAL cannot happen for a valid timespec
  }
}

std::vector<Sample> SamplesFromCumulative(Progress baseline,
                                          const std::vector<Progress>& cumulative) {
  std::vector<Sample> samples;
  samples.reserve(cumulative.size());
  Progress previous = baseline;
  for (size_t i = 0; i < cumulative.size(); ++i) {
    samples.push_back({static_cast<uint32_t>(i + 1), cumulative[i].rounds - previous.rounds,
                       cumulative[i].pages - previous.pages});
    previous = cumulative[i];
  }
  return samples;
}

SamplingOutcome SampleRounds(MonotonicClock& clock, const SamplingPlan& plan,
                             const SamplingHooks& hooks) {
  SamplingOutcome outcome;
  auto aborted = [&hooks] { return hooks.should_abort && hooks.should_abort(); };
  const nanoseconds start = clock.Now();
  const nanoseconds measure_start = start + plan.warmup;

  // Warm-up in one-second steps so a failing worker or a signal is noticed promptly.
  for (nanoseconds step = start; step < measure_start;) {
    step = std::min<nanoseconds>(step + seconds(1), measure_start);
    if (!clock.SleepUntil(step)) {
      outcome.end = SamplingOutcome::End::kInterrupted;
      return outcome;
    }
    if (aborted()) {
      outcome.end = SamplingOutcome::End::kAborted;
      return outcome;
    }
  }

  const Progress baseline = hooks.read_progress();
  const nanoseconds baseline_time = clock.Now();
  if (hooks.measurement_started) hooks.measurement_started();
  std::vector<Progress> cumulative;
  cumulative.reserve(plan.seconds);
  for (uint32_t second = 1; second <= plan.seconds; ++second) {
    if (!clock.SleepUntil(measure_start + seconds(second))) {
      outcome.end = SamplingOutcome::End::kInterrupted;
      break;
    }
    cumulative.push_back(hooks.read_progress());
    if (hooks.second_done) hooks.second_done(second, cumulative.back().rounds - baseline.rounds);
    if (aborted()) {
      outcome.end = SamplingOutcome::End::kAborted;
      break;
    }
  }
  outcome.measured_elapsed = clock.Now() - baseline_time;
  if (hooks.measurement_ended) hooks.measurement_ended();
  outcome.samples = SamplesFromCumulative(baseline, cumulative);
  for (const auto& s : outcome.samples) {
    outcome.rounds += s.rounds;
    outcome.pages += s.pages;
  }
  if (outcome.end == SamplingOutcome::End::kCompleted && plan.seconds > 0) {
    outcome.throughput_rounds_per_second =
        static_cast<double>(outcome.rounds) / static_cast<double>(plan.seconds);
    outcome.pages_per_second =
        static_cast<double>(outcome.pages) / static_cast<double>(plan.seconds);
  }
  outcome.too_coarse = outcome.rounds < kMinRoundsToCompare;
  return outcome;
}

HarnessResult RunHarness(const std::vector<ThreadGroup>& groups, const SamplingPlan& plan,
                         MonotonicClock& clock, const HarnessHooks& hooks) {
  HarnessResult result;
  size_t total_threads = 0;
  for (const auto& g : groups) total_threads += g.threads;

  std::vector<RoundCounter> counters(total_threads);
  std::vector<WorkerContext> contexts(total_threads);
  std::vector<size_t> group_of(total_threads);
  std::vector<pthread_t> threads;
  threads.reserve(total_threads);
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  FirstFailure failure;

  size_t slot = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (uint32_t i = 0; i < groups[g].threads; ++i, ++slot) {
      contexts[slot] = {&groups[g].body, i, &counters[slot], &go, &stop, &failure};
      group_of[slot] = g;
    }
  }

  // Workers inherit a mask with SIGINT/SIGTERM blocked: the signal then wakes the
  // sampling thread's clock_nanosleep instead of landing in a random worker.
  sigset_t block, previous;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  long min_stack = ::sysconf(_SC_THREAD_STACK_MIN);
  pthread_attr_setstacksize(
      &attr,
      std::max<size_t>(kWorkerStackBytes, min_stack > 0 ? static_cast<size_t>(min_stack) : 0));
  std::string create_error;
  for (size_t i = 0; i < total_threads; ++i) {
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, WorkerMain, &contexts[i]);
    if (rc != 0) {
      create_error = "creating thread " + std::to_string(i + 1) + " of " +
                     std::to_string(total_threads) + ": " + std::strerror(rc);
      break;
    }
    threads.push_back(thread);
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  result.threads_started = static_cast<uint32_t>(threads.size());

  auto join_all = [&] {
    stop.store(true, std::memory_order_relaxed);
    go.store(true, std::memory_order_release);
    go.notify_all();
    for (pthread_t t : threads) pthread_join(t, nullptr);
  };
  if (!create_error.empty()) {
    join_all();
    result.error = create_error;
    return result;
  }

  auto snapshot = [&] {
    std::vector<uint64_t> values(total_threads);
    for (size_t i = 0; i < total_threads; ++i) values[i] = counters[i].Read();
    return values;
  };
  auto snapshot_pages = [&] {
    std::vector<uint64_t> values(total_threads);
    for (size_t i = 0; i < total_threads; ++i) values[i] = counters[i].ReadPages();
    return values;
  };
  std::vector<uint64_t> at_start, at_end, pages_at_start, pages_at_end;
  SamplingHooks sampling_hooks;
  sampling_hooks.read_progress = [&] {
    Progress sum;
    for (size_t i = 0; i < total_threads; ++i) {
      if (!groups[group_of[i]].counter_name.empty()) continue;
      sum.rounds += counters[i].Read();
      sum.pages += counters[i].ReadPages();
    }
    return sum;
  };
  sampling_hooks.should_abort = [&] { return failure.failed(); };
  sampling_hooks.measurement_started = [&] {
    at_start = snapshot();
    pages_at_start = snapshot_pages();
    if (hooks.measurement_started) hooks.measurement_started();
  };
  sampling_hooks.second_done = hooks.second_done;
  sampling_hooks.measurement_ended = [&] {
    at_end = snapshot();
    pages_at_end = snapshot_pages();
    if (hooks.measurement_ended) hooks.measurement_ended();
  };

  go.store(true, std::memory_order_release);
  go.notify_all();
  if (hooks.threads_started) hooks.threads_started();
  result.sampling = SampleRounds(clock, plan, sampling_hooks);
  join_all();

  if (!at_start.empty() && !at_end.empty()) {
    bool first = true;
    for (size_t i = 0; i < total_threads; ++i) {
      uint64_t delta = at_end[i] - at_start[i];
      const std::string& name = groups[group_of[i]].counter_name;
      if (!name.empty()) {
        result.helper_rounds[name] += delta;
        const std::string& pages = groups[group_of[i]].pages_counter_name;
        if (!pages.empty()) result.helper_pages[pages] += pages_at_end[i] - pages_at_start[i];
        continue;
      }
      result.min_thread_rounds = first ? delta : std::min(result.min_thread_rounds, delta);
      result.max_thread_rounds = std::max(result.max_thread_rounds, delta);
      first = false;
    }
  }
  for (const auto& g : groups) {
    if (!g.counter_name.empty()) result.helper_rounds.try_emplace(g.counter_name, 0);
    if (!g.pages_counter_name.empty()) result.helper_pages.try_emplace(g.pages_counter_name, 0);
  }
  switch (result.sampling.end) {
    case SamplingOutcome::End::kCompleted:
      result.ok = !failure.failed();
      if (!result.ok) result.error = failure.message();
      break;
    case SamplingOutcome::End::kInterrupted:
      result.interrupted = true;
      result.error = "interrupted";
      break;
    case SamplingOutcome::End::kAborted:
      result.error = failure.message();
      break;
  }
  return result;
}

}  // namespace faultline::workloads
