#pragma once
// What the run flow needs from the controller while and after a run: renew the run's lease
// by heartbeats, deliver its result. AgentClient implements it over gRPC; the unit tests
// use a fake that records what it was sent.
#include <chrono>

#include "faultline/v1/agent.pb.h"

namespace faultline::agent {

enum class LeaseStatus {
  kRenewed,      // the attempt is current and its lease was extended
  kLost,         // the controller ended the attempt (cancelled, superseded, lease lapsed)
  kUnreachable,  // no answer: the lease may still hold; try again at the next heartbeat
};

enum class Delivery {
  kAccepted,  // stored (or already stored: uploads are idempotent)
  kRefused,   // the controller will never take it (attempt no longer current, ...): final
  kFailed,    // not delivered: try again later
};

class ControllerLink {
 public:
  virtual ~ControllerLink() = default;
  virtual LeaseStatus Heartbeat(const v1::HeartbeatRequest& request) = 0;
  virtual Delivery Report(const v1::ReportResultRequest& request) = 0;
  // How often a running attempt must heartbeat (the controller says so on hello).
  virtual std::chrono::seconds heartbeat_interval() const = 0;
};

}  // namespace faultline::agent
