// The probes of a run (probe.h): driven in order and ended in reverse, the first refusal
// stops the findings, and the command's options choose them.
#include "agent/workloads/probe.h"

#include <gtest/gtest.h>

#include "agent/workloads/exit_codes.h"

namespace faultline::workloads {
namespace {

// Writes each hook it sees, with its name, to a shared log; refuses its findings if told.
class Recorder final : public Probe {
 public:
  Recorder(std::string name, std::vector<std::string>* log, bool refuse = false)
      : name_(std::move(name)), log_(log), refuse_(refuse) {}
  void ThreadsStarted() override { log_->push_back(name_ + ".threads"); }
  void MeasurementStarted() override { log_->push_back(name_ + ".start"); }
  void MeasurementEnded() override { log_->push_back(name_ + ".end"); }
  bool AddFindings(const ProbeFindings& out, std::string* error) const override {
    log_->push_back(name_ + ".findings");
    (*out.counters)[name_] = 1;
    (*out.environment)[name_ + ".note"] = "x";
    if (refuse_) *error = "--" + name_ + ": could not be measured";
    return !refuse_;
  }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  bool refuse_;
};

TEST(Probes, StartInOrderEndInReverseAndTheFirstRefusalStops) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<Probe>> list;
  list.push_back(std::make_unique<Recorder>("a", &log));
  list.push_back(std::make_unique<Recorder>("b", &log, /*refuse=*/true));
  list.push_back(std::make_unique<Recorder>("c", &log));
  Probes probes(std::move(list));
  probes.ThreadsStarted();
  probes.MeasurementStarted();
  probes.MeasurementEnded();
  std::map<std::string, double> counters;
  std::map<std::string, std::string> environment;
  std::string error;
  EXPECT_FALSE(probes.AddFindings({.counters = &counters, .environment = &environment}, &error));
  EXPECT_EQ(error, "--b: could not be measured");
  EXPECT_EQ(log, (std::vector<std::string>{"a.threads", "b.threads", "c.threads", "a.start",
                                           "b.start", "c.start", "c.end", "b.end", "a.end",
                                           "a.findings", "b.findings"}));
  EXPECT_EQ(counters.count("a"), 1u);
  EXPECT_EQ(counters.count("c"), 0u) << "nothing after the refusal";
}

TEST(Probes, TheCommandsOptionsChooseThem) {
  WorkloadCommand none;
  int exit_code = 0;
  std::string error;
  auto made = MakeProbes(none, &exit_code, &error);
  ASSERT_TRUE(made.has_value()) << error;
  EXPECT_TRUE(made->empty());

  WorkloadCommand both;
  both.mmap_lock_waits = true;
  both.profile_hz = 99;
  made = MakeProbes(both, &exit_code, &error);
  ASSERT_TRUE(made.has_value()) << error;
  EXPECT_EQ(made->size(), 2u);

  WorkloadCommand unknown;
  unknown.events = {"sw:no-such-event"};
  made = MakeProbes(unknown, &exit_code, &error);
  EXPECT_FALSE(made.has_value());
  EXPECT_EQ(exit_code, kExitUsage);
  EXPECT_EQ(error.rfind("--events: ", 0), 0u) << error;
  EXPECT_NE(error.find("no-such-event"), std::string::npos) << error;
}

}  // namespace
}  // namespace faultline::workloads
