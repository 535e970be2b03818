#pragma once
// Prometheus metrics of the controller (exposition format 0.0.4, prometheus-cpp core).
// Process metrics (RPC latency, finished runs) live in a long-lived registry; state gauges
// (throughput, comparisons, fleet, queue) are rebuilt from PostgreSQL on every scrape, so a
// series that disappears from the database disappears from /metrics, and several
// controller replicas export the same values. A scrape only reads: finished jobs' medians
// and comparisons were summarized once (MetricsSource, orchestration/summaries.h).
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
#include "services/controller/http/http_server.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class ControllerMetrics {
 public:
  ControllerMetrics();

  void ObserveRpc(const std::string& method, grpc::StatusCode code, double seconds);
  void ObserveRunFinished(const std::string& benchmark, bool succeeded, double seconds);
  // A kernel build a builder finished: its duration (of the build that made the image;
  // 0 when the builder found it built) and whether its cache had it.
  void ObserveBuild(bool succeeded, double seconds, bool cached);
  // A finished job's phases per arch (core/phases.h): faultline_job_phase_seconds{arch,
  // phase} and faultline_job_seconds{arch} (submission to the arch's last run's end).
  void ObservePhases(const std::vector<ArchPhases>& phases);

  // The /metrics body. On a database error the process metrics are still served, with
  // faultline_database_up 0. With `http`: the HTTP endpoint's own connections and refusals.
  std::string Render(MetricsSource* source, BoardStore* boards,
                     const HttpServerStats* http = nullptr);
  // The same body in parts, for HttpResponse::shared_body: the comparison families (most of
  // the body with many boards) are a part kept between scrapes, never copied.
  std::vector<std::shared_ptr<const std::string>> RenderParts(
      MetricsSource* source, BoardStore* boards, const HttpServerStats* http = nullptr);

 private:
  // A finished job's comparison samples, rendered once per job version: one chunk per
  // comparison family (ratio, bounds, p, q, verdict, samples, counters).
  struct RenderedJob {
    int64_t finished_ms = 0;
    std::vector<std::string> chunks;
  };
  static std::shared_ptr<const RenderedJob> RenderComparisons(const JobComparisons& job);
  // faultline_throughput_rounds_per_second and faultline_last_success_timestamp_seconds.
  static std::string RenderSeries(const std::vector<SeriesPoint>& series);
  // Keeps comparisons_block_ in step with the snapshot's exported jobs (rendered_mu_ held).
  void UpdateComparisons(const MetricsSnapshot& snapshot, MetricsSource* source);
  std::mutex rendered_mu_;
  int64_t series_version_ = -1;  // what series_block_ shows (-1: nothing kept)
  std::shared_ptr<const std::string> series_block_;
  std::map<int64_t, std::shared_ptr<const RenderedJob>> rendered_;  // by job
  std::vector<JobVersion> comparisons_key_;  // the jobs comparisons_block_ was written for
  // Every comparison family: HELP, TYPE and samples.
  std::shared_ptr<const std::string> comparisons_block_ = std::make_shared<const std::string>();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  prometheus::Family<prometheus::Histogram>* run_duration_;
  prometheus::Family<prometheus::Counter>* runs_finished_;
  prometheus::Family<prometheus::Histogram>* build_duration_;
  prometheus::Family<prometheus::Counter>* builds_finished_;
  prometheus::Family<prometheus::Histogram>* job_phase_;
  prometheus::Family<prometheus::Histogram>* job_total_;
};

// Times one RPC into the metrics when Finish() is called (by Done() with the call's status);
// nothing is observed on scope exit, so a call that never finishes is never counted.
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

}  // namespace faultline::controller
