#pragma once
// The series robot on a thread of its own (#57). A pass reads the archive, runs git, talks
// to SMTP and patchwork: seconds to minutes when a server is slow. Inside the background
// duties (the dispatcher's 1 s tick) it held up lease reaping, switch expiry and schedules
// for as long, and the duty lease lapsed mid-pass. Here it runs beside them, a pass every
// `every`, and only while this controller runs the duties (holds the duty lease).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace faultline::controller {

class RobotDuty {
 public:
  // `pass`: one robot pass (SeriesRobot::RunOnce and its log lines); `may_run`: whether this
  // controller runs the duties now (BackgroundDuties::runs_duties).
  RobotDuty(std::function<void()> pass, std::chrono::seconds every, std::function<bool()> may_run);
  ~RobotDuty() { Stop(); }
  RobotDuty(const RobotDuty&) = delete;
  RobotDuty& operator=(const RobotDuty&) = delete;

  void Start();
  // Waits for a pass in flight to end (SMTP and patchwork calls have their own timeouts).
  void Stop();

  // How often the lease is looked at while another controller holds it.
  static constexpr std::chrono::seconds kStandbyPoll{1};

 private:
  void Loop();

  std::function<void()> pass_;
  std::chrono::seconds every_;
  std::function<bool()> may_run_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline::controller
