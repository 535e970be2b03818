// A job's run options (convert/run_options.h): checked once where a spec comes in, in either
// spelling (run_options or the older top-level fields), stored in one, and read back the
// same by every reader (faultline/v1/run_options.h).
#include "services/controller/convert/run_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "faultline/v1/run_options.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/submission.h"
#include "spec/spec_file.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;

// The refusal's message for `spec`, "" when it is accepted.
std::string Refusal(const v1::JobSpec& spec) {
  auto options = ValidateRunOptions(spec);
  if (options.ok()) return "";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(options.status().message());
}

TEST(RunOptions, EventsAreCheckedNamingTheEntryAsTheSpecSpelledIt) {
  v1::JobSpec spec;
  for (const char* e :
       {"mmap_lock:mmap_lock_start_locking", "exceptions:page_fault_user", "sw:page-faults",
        "sw:context-switches", "hw:cycles", "calls:lock_vma_under_rcu"}) {
    spec.mutable_run_options()->add_events(e);
  }
  auto options = ValidateRunOptions(spec);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->events_size(), 6);

  auto with_events = [](std::vector<std::string> events, bool older) {
    v1::JobSpec s;
    for (const auto& e : events) older ? s.add_events(e) : s.mutable_run_options()->add_events(e);
    return s;
  };
  EXPECT_EQ(Refusal(with_events({"sw:page-faults", "sw:pagefaults"}, false)),
            "spec.run_options.events[1]: 'sw:pagefaults': unknown software event 'pagefaults' "
            "(sw: one of page-faults, minor-faults, major-faults, context-switches, "
            "cpu-migrations, task-clock)");
  // The older spelling is named as written.
  EXPECT_THAT(Refusal(with_events({"hw:stalled-cycles"}, true)),
              ::testing::StartsWith("spec.events[0]: 'hw:stalled-cycles': unknown hardware event"));
  EXPECT_THAT(Refusal(with_events({"mmap_lock"}, false)),
              ::testing::HasSubstr("run_options.events[0]: 'mmap_lock': malformed event name"));
  EXPECT_THAT(Refusal(with_events({"Mmap_Lock:start"}, false)),
              ::testing::HasSubstr("malformed tracepoint name (want SYSTEM:NAME"));
  EXPECT_THAT(Refusal(with_events({"sw:page-faults", "x:y", "sw:page-faults"}, false)),
              ::testing::HasSubstr("events[2]: 'sw:page-faults': listed twice"));
  std::vector<std::string> many;
  for (int i = 0; i < 17; ++i) many.push_back("sys:event_" + std::to_string(i));
  EXPECT_EQ(Refusal(with_events(many, false)),
            "spec.run_options.events: at most 16 events, got 17");
  many.pop_back();
  EXPECT_EQ(Refusal(with_events(many, false)), "");
  // A hostile name is quoted cut, never whole.
  EXPECT_LT(Refusal(with_events({"sw:" + std::string(100000, 'x')}, false)).size(), 300u);
}

TEST(RunOptions, AProfileSamplesAtTheDefaultUnlessItSaysAndHasALimit) {
  v1::JobSpec spec;
  auto options = ValidateRunOptions(spec);
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->has_profile()) << "no profile: no sampling";

  spec.mutable_run_options()->mutable_profile();
  options = ValidateRunOptions(spec);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->profile().frequency_hz(), kDefaultProfileHz) << "profile: {} is 99 Hz";

  spec.mutable_run_options()->mutable_profile()->set_frequency_hz(4000);
  spec.mutable_run_options()->mutable_profile()->set_pmu(true);
  options = ValidateRunOptions(spec);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->profile().frequency_hz(), 4000u);
  EXPECT_TRUE(options->profile().pmu());

  spec.mutable_run_options()->mutable_profile()->set_frequency_hz(10001);
  EXPECT_EQ(Refusal(spec),
            "spec.run_options.profile.frequency_hz: 10001: at most 10000 samples per second per "
            "thread");
  v1::JobSpec older;
  older.mutable_profile()->set_frequency_hz(4294967295u);
  EXPECT_EQ(Refusal(older),
            "spec.profile.frequency_hz: 4294967295: at most 10000 samples per second per thread");
}

TEST(RunOptions, AnOptionGivenBothWaysMustSayTheSameThing) {
  v1::JobSpec spec;
  spec.add_events("sw:page-faults");
  spec.mutable_run_options()->add_events("sw:page-faults");
  spec.mutable_profile()->set_frequency_hz(99);
  spec.mutable_run_options()->mutable_profile()->set_frequency_hz(99);
  spec.set_mmap_lock_waits(true);
  auto options = ValidateRunOptions(spec);
  ASSERT_TRUE(options.ok()) << options.status();  // a spec read back from GetJob, resent
  EXPECT_THAT(options->events(), ElementsAre("sw:page-faults"));
  EXPECT_TRUE(options->mmap_lock_waits()) << "from the older field";

  spec.mutable_run_options()->add_events("sw:major-faults");
  EXPECT_EQ(Refusal(spec),
            "spec.events: given both as events and as run_options.events, "
            "differently");
  spec.clear_events();
  spec.mutable_run_options()->mutable_profile()->set_pmu(true);
  EXPECT_EQ(Refusal(spec),
            "spec.profile: given both as profile and as run_options.profile, "
            "differently");
}

// Every reader sees the same options whichever way the spec (or a job stored before
// run_options) spelled them.
TEST(RunOptions, TheOlderSpellingReadsTheSame) {
  v1::JobSpec older;
  older.add_events("sw:page-faults");
  older.set_mmap_lock_waits(true);
  older.mutable_profile()->set_frequency_hz(499);
  v1::JobSpec newer;
  newer.mutable_run_options()->add_events("sw:page-faults");
  newer.mutable_run_options()->set_mmap_lock_waits(true);
  newer.mutable_run_options()->mutable_profile()->set_frequency_hz(499);
  EXPECT_TRUE(MessageDifferencer::Equals(v1::RunOptionsOf(older), v1::RunOptionsOf(newer)));

  // Stored in one spelling.
  auto checked = ValidateRunOptions(older);
  ASSERT_TRUE(checked.ok());
  SetRunOptions(*checked, &older);
  EXPECT_TRUE(older.events().empty());
  EXPECT_FALSE(older.mmap_lock_waits());
  EXPECT_FALSE(older.has_profile());
  EXPECT_TRUE(MessageDifferencer::Equals(older.run_options(), newer.run_options()));

  // An assignment from an older controller (fields 10, 13, 14 only) reads the same as one
  // with options; its frequency 0 profile means none.
  v1::Assignment a;
  a.add_events("sw:page-faults");
  a.set_mmap_lock_waits(true);
  a.mutable_profile()->set_frequency_hz(499);
  EXPECT_TRUE(MessageDifferencer::Equals(v1::RunOptionsOf(a), newer.run_options()));
  a.mutable_profile()->set_frequency_hz(0);
  EXPECT_FALSE(v1::RunOptionsOf(a).has_profile());
}

TEST(RunOptions, JsonRoundTripsWithTheProtosFieldNames) {
  v1::RunOptions options;
  options.add_events("sw:page-faults");
  options.mutable_profile()->set_frequency_hz(99);
  options.mutable_profile()->set_pmu(true);
  const std::string json = v1::RunOptionsToJson(options);
  EXPECT_EQ(json, R"({"events":["sw:page-faults"],"profile":{"frequency_hz":99,"pmu":true}})");
  auto back = RunOptionsFromJson(json);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*back, options));
  EXPECT_EQ(v1::RunOptionsToJson(v1::RunOptions()), "{}");
  EXPECT_FALSE(RunOptionsFromJson("[1]").ok());
  EXPECT_FALSE(RunOptionsFromJson(R"({"profile": 7})").ok());
}

// Submitting: refused before anything is stored; accepted specs are stored with their
// options in run_options (as checked), whichever spelling came in, and the job carries them.
TEST(RunOptions, ASubmittedSpecIsStoredInOneSpelling) {
  fakes::FakeStores fake;
  fake.boards.AddBoard(fakes::VanillaBoard("b1", {"vanilla", "patched"}));
  v1::JobSpec spec;
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(1);
  spec.add_kernels("vanilla");
  spec.mutable_memcg()->set_memory_max("256M");
  spec.add_events("sw:pagefaults");
  auto refused = SubmitSpec(&fake.boards, &fake.jobs, spec, "r1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), ::testing::StartsWith("spec.events[0]:"));
  EXPECT_EQ(fake.jobs.create_calls(), 0);

  spec.clear_events();
  spec.add_events("sw:page-faults");
  spec.mutable_profile();
  auto submitted = SubmitSpec(&fake.boards, &fake.jobs, spec, "r2");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto job = fake.jobs.GetJob(submitted->created.job_id);
  ASSERT_TRUE(job.ok());
  v1::JobSpec stored;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(job->spec_json, &stored).ok());
  EXPECT_TRUE(stored.events().empty()) << job->spec_json;
  EXPECT_FALSE(stored.has_profile()) << job->spec_json;
  EXPECT_THAT(stored.run_options().events(), ElementsAre("sw:page-faults"));
  EXPECT_EQ(stored.run_options().profile().frequency_hz(), kDefaultProfileHz);

  // The same spec in the new spelling is the same job (a retry under its request id).
  v1::JobSpec again = spec;
  SetRunOptions(stored.run_options(), &again);
  auto retried = SubmitSpec(&fake.boards, &fake.jobs, again, "r2");
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->created.job_id, submitted->created.job_id);
}

// The example specs load, their options pass, and they teach the one spelling.
TEST(RunOptions, TheExampleSpecsSpellThemAsRunOptions) {
  int with_options = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(FAULTLINE_SOURCE_DIR "/deploy/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    auto loaded = spec::LoadJobSpecFile(entry.path().string());
    ASSERT_TRUE(loaded.ok()) << entry.path() << ": " << loaded.status();
    EXPECT_TRUE(ValidateRunOptions(*loaded).ok()) << entry.path();
    EXPECT_TRUE(loaded->events().empty() && !loaded->mmap_lock_waits() && !loaded->has_profile())
        << entry.path() << " spells a run option the older way";
    with_options += loaded->has_run_options();
  }
  EXPECT_GE(with_options, 3);
}

}  // namespace
}  // namespace faultline::controller
