#pragma once
// Work that runs on a thread of its own beside the background duties, a pass every `every`,
// and only while this controller runs the duties (holds the duty lease): the series robot,
// its change-point bisector, the comparison summarizer. Their passes take seconds to minutes
// (a slow SMTP relay or patchwork, git, reports of 1,000 comparisons); inside the duties
// (the dispatcher's 1 s tick) they held up lease reaping, switch expiry and schedules for as
// long, and the duty lease lapsed mid-pass (#57).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace faultline::controller {

class PeriodicDuty {
 public:
  // `pass`: one pass (and its log lines); true when it left work behind, and the next pass
  // starts at once. `may_run`: whether this controller runs the duties now
  // (BackgroundDuties::runs_duties).
  PeriodicDuty(std::function<bool()> pass, std::chrono::milliseconds every,
               std::function<bool()> may_run);
  ~PeriodicDuty() { Stop(); }
  PeriodicDuty(const PeriodicDuty&) = delete;
  PeriodicDuty& operator=(const PeriodicDuty&) = delete;

  void Start();
  // Waits for a pass in flight to end (SMTP and patchwork calls have their own timeouts).
  void Stop();

  // How often the lease is looked at while another controller holds it.
  static constexpr std::chrono::seconds kStandbyPoll{1};

 private:
  void Loop();

  std::function<bool()> pass_;
  std::chrono::milliseconds every_;
  std::function<bool()> may_run_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline::controller
