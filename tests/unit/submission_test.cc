// Submitting specs over the in-memory stores: validation against the registered boards, the
// shuffle seed, request-id idempotence; and cron slots.
#include "services/controller/orchestration/submission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::sys_days;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::chrono::system_clock::time_point kDay{
    sys_days{std::chrono::year{2024} / std::chrono::March / 1}};

int64_t Ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(3);
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.mutable_memcg()->set_memory_max("256M");
  (*spec.mutable_matrix())["threads"].add_values("4");
  (*spec.mutable_matrix())["threads"].add_values("8");
  return spec;
}

class SubmissionTest : public ::testing::Test {
 protected:
  void AddBoard() { fake_.boards.AddBoard(fakes::VanillaBoard("b1", {"vanilla", "patched"})); }
  FakeStores fake_;
};

TEST_F(SubmissionTest, WithoutBoardsTheKernelsAreRefusedNamingTheField) {
  auto job = ValidateAgainstFleet(&fake_.boards, Spec());
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()), StartsWith("spec.kernels[0]:"));
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("no eligible board"));

  auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "r1");
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_.jobs.create_calls(), 0);  // nothing stored
}

TEST_F(SubmissionTest, AnUnknownBoardIsRefusedNamingTheField) {
  AddBoard();
  v1::JobSpec spec = Spec();
  spec.add_boards("b1");
  spec.add_boards("ghost");
  auto job = ValidateAgainstFleet(&fake_.boards, spec);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()), StartsWith("spec.boards[1]:"));
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("ghost"));
}

TEST_F(SubmissionTest, AnUnreachableBoardStoreIsUnavailable) {
  AddBoard();
  fake_.boards.SetUnavailable(true);
  auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "r1");
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SubmissionTest, StoresTheValidatedJob) {
  AddBoard();
  auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "r1");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_TRUE(submitted->created.created);
  EXPECT_EQ(submitted->runs, 2u * 2 * 3);  // cells x kernels x repetitions
  EXPECT_EQ(submitted->benchmark, "filemap-thrash");
  auto job = fake_.jobs.GetJob(submitted->created.job_id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->counts.total, 12u);
  EXPECT_EQ(job->baseline, "vanilla");
  EXPECT_EQ(fake_.jobs.request_id(job->id), "r1");  // passed through for idempotence
}

TEST_F(SubmissionTest, TheShuffleSeedDerivesFromTheRequestId) {
  AddBoard();
  auto first = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "nightly-1");
  auto other = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "nightly-2");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(other.ok()) << other.status();
  const uint64_t seed = fake_.jobs.GetJob(first->created.job_id)->shuffle_seed;
  // FNV-1a of "nightly-1" with bit 32 set: fixed on every build, not std::hash's choice.
  EXPECT_EQ(seed, 0xe53576f3e841b69cull);
  EXPECT_NE(fake_.jobs.GetJob(other->created.job_id)->shuffle_seed, seed);

  // A retry under the same id: the same seed, so the same spec, so the first job.
  auto retry = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "nightly-1");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_FALSE(retry->created.created);
  EXPECT_EQ(retry->created.job_id, first->created.job_id);
  EXPECT_EQ(fake_.jobs.ListJobs(10)->size(), 2u);

  // Another controller (another store) derives the same seed from the id.
  FakeStores elsewhere;
  elsewhere.boards.AddBoard(fake_.boards.ListBoards()->front().summary);
  auto replica = SubmitSpec(&elsewhere.boards, &elsewhere.jobs, Spec(), "nightly-1");
  ASSERT_TRUE(replica.ok()) << replica.status();
  EXPECT_EQ(elsewhere.jobs.GetJob(replica->created.job_id)->shuffle_seed, seed);

  // The same id with another spec is refused.
  v1::JobSpec changed = Spec();
  changed.set_repetitions(4);
  auto clash = SubmitSpec(&fake_.boards, &fake_.jobs, changed, "nightly-1");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SubmissionTest, AGivenShuffleSeedIsKept) {
  AddBoard();
  v1::JobSpec spec = Spec();
  spec.set_shuffle_seed(42);
  auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, spec, "r1");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(fake_.jobs.GetJob(submitted->created.job_id)->shuffle_seed, 42u);
}

TEST_F(SubmissionTest, WithoutARequestIdEveryJobIsNew) {
  AddBoard();
  auto a = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "");
  auto b = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->created.job_id, b->created.job_id);
  EXPECT_NE(fake_.jobs.GetJob(a->created.job_id)->shuffle_seed, 0u);
  EXPECT_EQ(fake_.jobs.request_id(a->created.job_id), "");
}

TEST(NextSlotMs, TheFirstSlotStrictlyAfterNow) {
  EXPECT_EQ(NextSlotMs("0 2 * * *", kDay + hours(1)), Ms(kDay + hours(2)));
  EXPECT_EQ(NextSlotMs("0 2 * * *", kDay + hours(2)), Ms(kDay + hours(24 + 2)));
  EXPECT_EQ(NextSlotMs("0 2 * * *", kDay + hours(2) - milliseconds(1)), Ms(kDay + hours(2)));
  EXPECT_EQ(NextSlotMs("@hourly", kDay + hours(5) + std::chrono::minutes(1)), Ms(kDay + hours(6)));
}

TEST(NextSlotMs, AnInvalidOrImpossibleCronIsAYearAhead) {
  const auto now = kDay + hours(1);
  EXPECT_EQ(NextSlotMs("not a cron", now), Ms(now + hours(24 * 365)));
  EXPECT_EQ(NextSlotMs("0 0 30 2 *", now), Ms(now + hours(24 * 365)));  // 30 February
}

}  // namespace
}  // namespace faultline::controller
