#pragma once
// faultline-fleetsim (tests/bench/fleetsim.cc): options, statistics, the one timer thread.
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/tls.h"
#include "faultline/v1/agent.grpc.pb.h"
#include "faultline/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "services/controller/api/auth.h"
#include "services/controller/storage/pg_store.h"

#include "common/strings.h"

namespace faultline::fleetsim {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using nlohmann::json;

inline double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
inline double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ---- options ----

struct Options {
  std::string controller;
  std::string user_controller;  // where the users submit and watch (default: controller)
  std::string token_file;       // "BOARD TOKEN" lines; without: no credentials (--auth off)
  std::string user_token_file;  // one line
  int boards = 10;
  int boards_per_channel = 50;
  int connect_parallel = 64;  // Hellos in flight at once while connecting
  int runs = 0;               // total runs over all users' jobs; 0: idle only
  int runs_per_job = 10'000;  // a user's runs go in jobs of at most this many, one after another
  int run_seconds = 1;        // the jobs' duration; a simulated run lasts this long
  double time_scale = 1.0;    // a run lasts duration x time_scale (results still say duration)
  int users = 1;
  int readers = 0;  // users that list jobs and read the latest report every second meanwhile
  std::vector<std::string> kernels = {"vanilla", "patched"};
  std::string kernel_mix = "both";  // both: every board runs both labels; split: half each
  double settle_seconds = 2.0;      // after every board parked, before the first submit
  double idle_seconds = 0;          // boards stay parked this long (controller idle figures)
  std::string ready_file;           // created once every board parked and settled
  std::string go_file;              // if set: the users submit once it exists (after the idle)
  int heartbeat_seconds = 0;        // 0: the interval the controller's Hello answers
  int acquire_wait_seconds = 30;
  double deadline_seconds = 300;
  std::string json_file;
  bool verify = true;  // every run completed exactly once, none assigned twice
  // A controller may die mid-study (--controller lists several): a run may be assigned more
  // than once and take more than one attempt, but must still complete exactly once.
  bool allow_retries = false;
  bool quiet = false;
};

// The controller must be on this machine: 127.0.0.0/8, ::1 or localhost.
inline std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Channel `c`'s target over a list of controllers: the list rotated by c, so channels spread
// over the controllers and each fails over to the next (ControllerTarget: pick_first).
inline std::string ChannelTarget(const std::string& controllers, size_t c) {
  std::vector<std::string> list = SplitList(controllers);
  if (list.size() < 2) return controllers;
  std::rotate(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(c % list.size()),
              list.end());
  std::string joined;
  for (const auto& a : list) joined += (joined.empty() ? "" : ",") + a;
  auto target = faultline::ControllerTarget(joined);
  return target.ok() ? *target : controllers;
}

inline bool IsLoopback(const std::string& target, std::string* why) {
  std::string t = target;
  for (const char* scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (t.rfind(scheme, 0) == 0) t = t.substr(std::string(scheme).size());
  }
  std::string host;
  if (!t.empty() && t[0] == '[') {
    auto end = t.find(']');
    if (end == std::string::npos) {
      *why = "unbalanced [";
      return false;
    }
    host = t.substr(1, end - 1);
  } else {
    auto colon = t.rfind(':');
    if (colon == std::string::npos) {
      *why = "expected HOST:PORT";
      return false;
    }
    host = t.substr(0, colon);
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) == 127) return true;
    *why = host + " is not a loopback address";
    return false;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    *why = host + " is not a loopback address";
    return false;
  }
  *why = "'" + host + "' is not a loopback address (names other than localhost are refused)";
  return false;
}

// ---- statistics ----

inline json Distribution(std::vector<double> v) {
  json out = {{"count", v.size()}};
  if (v.empty()) return out;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    // nearest rank
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  double sum = 0;
  for (double x : v) sum += x;
  out["p50"] = pct(50);
  out["p90"] = pct(90);
  out["p99"] = pct(99);
  out["max"] = v.back();
  out["mean"] = sum / static_cast<double>(v.size());
  return out;
}

inline std::string CodeName(grpc::StatusCode code) {
  // gRPC's codes are absl's, number for number.
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "CODE_" + std::to_string(static_cast<int>(code)) : name;
}

struct AssignmentSeen {
  int64_t job_id;
  int64_t run_id;
  int board;
  TimePoint received;
  TimePoint acquire_sent;  // when the AcquireWork call that got it started
};

struct JobSeen {
  TimePoint submit_started;
  TimePoint submit_returned;
  uint32_t runs = 0;
};

// Everything measured, under one mutex (contention is small next to the RPCs).
class Stats {
 public:
  void Rpc(const std::string& method, const grpc::Status& s, Clock::duration took, bool stopping) {
    std::lock_guard lock(mu_);
    auto& m = rpcs_[method];
    if (s.ok()) {
      m.ok++;
      m.latency_ms.push_back(Ms(took));
    } else if (stopping && s.error_code() == grpc::StatusCode::CANCELLED) {
      m.cancelled_at_stop++;  // our own cancellation of parked calls: not an error
    } else {
      m.errors[CodeName(s.error_code())]++;
      if (m.first_error.empty()) m.first_error = s.error_message();
    }
  }
  void Assigned(const AssignmentSeen& a) {
    std::lock_guard lock(mu_);
    assignments_.push_back(a);
    assigned_count_[a.run_id]++;
    if (!first_assignment_ || a.received < *first_assignment_) first_assignment_ = a.received;
  }
  void Reported(int64_t run_id, bool accepted, size_t samples, TimePoint at) {
    std::lock_guard lock(mu_);
    if (!accepted) return;
    completed_count_[run_id]++;
    samples_ += samples;
    reports_++;
    if (!first_report_) first_report_ = at;
    last_report_ = at;
  }
  void Heartbeat(bool cancel) {
    std::lock_guard lock(mu_);
    heartbeats_++;
    if (cancel) heartbeat_cancels_++;
  }
  void JobSubmitted(int64_t job_id, const JobSeen& j) {
    std::lock_guard lock(mu_);
    jobs_[job_id] = j;
  }
  void Problem(const std::string& p) {
    std::lock_guard lock(mu_);
    if (problems_.size() < 50) problems_.push_back(p);
    problem_count_++;
  }
  void WatchEvent() {
    std::lock_guard lock(mu_);
    watch_events_++;
  }
  void JobFinal(int64_t job_id, const std::string& state) {
    std::lock_guard lock(mu_);
    job_states_[job_id] = state;
  }

  struct RpcStats {
    uint64_t ok = 0;
    uint64_t cancelled_at_stop = 0;
    std::map<std::string, uint64_t> errors;
    std::string first_error;
    std::vector<double> latency_ms;
  };

  std::mutex mu_;
  std::map<std::string, RpcStats> rpcs_;
  std::vector<AssignmentSeen> assignments_;
  std::map<int64_t, int> assigned_count_;
  std::map<int64_t, int> completed_count_;
  std::map<int64_t, JobSeen> jobs_;
  std::map<int64_t, std::string> job_states_;
  std::optional<TimePoint> first_assignment_, first_report_;
  TimePoint last_report_{};
  uint64_t samples_ = 0, reports_ = 0, heartbeats_ = 0, heartbeat_cancels_ = 0;
  uint64_t watch_events_ = 0;
  std::vector<std::string> problems_;
  uint64_t problem_count_ = 0;
};

// ---- one timer thread for every board's delays ----

class Timers {
 public:
  Timers() : thread_([this] { Loop(); }) {}
  ~Timers() { Stop(); }
  void After(Clock::duration d, std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      if (!stop_) {
        due_.emplace(Clock::now() + d, std::move(fn));
        cv_.notify_one();
        return;
      }
    }
    fn();  // stopping: run it now (it sees the stop and ends its chain)
  }
  // Runs whatever is pending at once, then ends the thread.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      if (stop_) {
        auto pending = std::move(due_);
        due_.clear();
        lock.unlock();
        for (auto& [t, fn] : pending) fn();
        return;
      }
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (first->first > Clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      auto fn = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<TimePoint, std::function<void()>> due_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace faultline::fleetsim
