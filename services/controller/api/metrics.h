#pragma once
// Prometheus metrics of the controller (exposition format 0.0.4, prometheus-cpp core).
// Process metrics (RPC latency, finished runs) live in a long-lived registry; state gauges
// (throughput, comparisons, fleet, queue) are rebuilt from PostgreSQL on every scrape, so a
// series that disappears from the database disappears from /metrics, and several
// controller replicas export the same values.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "services/controller/api/http_server.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class ControllerMetrics {
 public:
  ControllerMetrics();

  void ObserveRpc(const std::string& method, grpc::StatusCode code, double seconds);
  void ObserveRunFinished(const std::string& benchmark, bool succeeded, double seconds);

  // The /metrics body. On a database error the process metrics are still served, with
  // faultline_database_up 0. With `http`: the HTTP endpoint's own connections and refusals.
  std::string Render(MetricsSource* source, BoardStore* boards, JobStore* jobs,
                     const HttpServerStats* http = nullptr);

 private:
  // A comparison's counters that changed significantly (q ≤ α), as exported.
  struct CounterChange {
    std::string name, unit;
    double ratio = 0, ci_low = 0, ci_high = 0;
  };
  // Per finished comparison job: comparing every counter of every run costs more than the
  // rest of a scrape, and a finished job's counters do not change, so each job version is
  // compared once. Keyed by comparison (board, baseline, candidate, config); entries of jobs
  // no longer exported are dropped on the next scrape.
  struct JobCounterChanges {
    int64_t finished_ms = 0;
    std::map<std::string, std::vector<CounterChange>> by_comparison;
  };
  std::mutex counter_cache_mu_;
  std::map<int64_t, JobCounterChanges> counter_cache_;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  prometheus::Family<prometheus::Histogram>* run_duration_;
  prometheus::Family<prometheus::Counter>* runs_finished_;
};

// Times one RPC into the metrics when it goes out of scope... or when Finish() is called.
class RpcTimer {
 public:
  RpcTimer(ControllerMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}
  void Finish(grpc::StatusCode code) {
    if (metrics_ == nullptr) return;
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - start_;
    metrics_->ObserveRpc(method_, code, d.count());
  }

 private:
  ControllerMetrics* metrics_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

// "threads=8,writers=2" (sorted keys) or "default" for a job without a matrix.
std::string ConfigLabel(const std::map<std::string, std::string>& cell);

}  // namespace faultline::controller
