#include "agent/artifact_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace faultline::agent {
namespace {

// An artifact in memory, streamed in small chunks. Told to, it drops the connection
// (UNAVAILABLE) after delivering `fail_after` bytes of one Read. Records the offsets asked.
class FakeSource : public ArtifactSource {
 public:
  explicit FakeSource(std::string data) : data_(std::move(data)) {}

  absl::Status Read(const std::string& sha256, uint64_t offset,
                    const std::function<absl::Status(absl::string_view)>& sink) override {
    offsets.push_back(offset);
    uint64_t delivered = 0;
    for (uint64_t pos = offset; pos < data_.size();) {
      if (fail_after && delivered == *fail_after) {
        return absl::UnavailableError("connection dropped");
      }
      uint64_t n = std::min<uint64_t>(kChunk, data_.size() - pos);
      if (fail_after) n = std::min(n, *fail_after - delivered);
      if (absl::Status s = sink(absl::string_view(data_).substr(pos, n)); !s.ok()) return s;
      pos += n;
      delivered += n;
    }
    return absl::OkStatus();
  }

  std::optional<uint64_t> fail_after;
  std::vector<uint64_t> offsets;

 private:
  static constexpr uint64_t kChunk = 300;
  std::string data_;
};

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(gen() & 0xff);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

bool Exists(const std::string& path) {
  return std::filesystem::exists(path);
}

// Sets a file's mtime to `seconds` after the epoch: LRU order without sleeping.
void SetMtime(const std::string& path, time_t seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class ArtifactCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/faultline-artifact-cache-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    dir_ = root_ + "/cache";  // missing: the cache creates it
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // The sha256 of `data`, by way of a scratch file outside the cache.
  std::string Sha(const std::string& data) {
    const std::string path = root_ + "/scratch";
    WriteFile(path, data);
    absl::StatusOr<std::string> sha = Sha256OfFile(path);
    EXPECT_TRUE(sha.ok()) << sha.status();
    std::filesystem::remove(path);
    return sha.value_or("");
  }

  // Fetches `data` under its own hash, labelled `label`.
  absl::StatusOr<CachedArtifact> FetchData(ArtifactCache& cache, const std::string& data,
                                           const std::string& label) {
    FakeSource source(data);
    return cache.Fetch(Sha(data), data.size(), "6.1.0-" + label, label, source);
  }

  std::string root_;
  std::string dir_;
};

TEST(Sha256OfFileTest, KnownVectorAndMissingFile) {
  char pattern[] = "/tmp/faultline-sha-test-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string root = pattern;
  WriteFile(root + "/abc", "abc");
  absl::StatusOr<std::string> sha = Sha256OfFile(root + "/abc");
  absl::StatusOr<std::string> missing = Sha256OfFile(root + "/missing");
  std::filesystem::remove_all(root);
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
}

TEST_F(ArtifactCacheTest, FetchesAndVerifies) {
  const std::string data = RandomBytes(5000, 1);
  const std::string sha = Sha(data);
  ArtifactCache cache(dir_, 1 << 20);
  FakeSource source(data);
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  absl::StatusOr<CachedArtifact> a =
      cache.Fetch(sha, data.size(), "6.1.0-test", "test", source,
                  [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); });
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->sha256, sha);
  EXPECT_EQ(a->path, dir_ + "/" + sha);
  EXPECT_EQ(a->bytes, 5000u);
  EXPECT_EQ(a->release, "6.1.0-test");
  EXPECT_EQ(a->label, "test");
  EXPECT_EQ(ReadFile(a->path), data);
  EXPECT_FALSE(Exists(a->path + ".partial"));
  EXPECT_EQ(ReadFile(a->path + ".meta"), "release=6.1.0-test\nlabel=test\nbytes=5000\n");
  EXPECT_EQ(source.offsets, std::vector<uint64_t>{0});

  ASSERT_GE(progress.size(), 2u);
  EXPECT_EQ(progress.front(), std::make_pair(uint64_t{0}, uint64_t{5000}));
  EXPECT_EQ(progress.back(), std::make_pair(uint64_t{5000}, uint64_t{5000}));
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));

  // Present: a second Fetch does not ask the source.
  absl::StatusOr<CachedArtifact> again = cache.Fetch(sha, data.size(), "x", "y", source);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->label, "test");
  EXPECT_EQ(source.offsets.size(), 1u);
}

TEST_F(ArtifactCacheTest, FindsArtifactAfterRestart) {
  const std::string data = RandomBytes(2000, 2);
  const std::string sha = Sha(data);
  {
    ArtifactCache cache(dir_, 1 << 20);
    ASSERT_TRUE(FetchData(cache, data, "before").ok());
  }
  ArtifactCache restarted(dir_, 1 << 20);
  std::optional<CachedArtifact> found = restarted.Find(sha);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, dir_ + "/" + sha);
  EXPECT_EQ(found->bytes, 2000u);
  EXPECT_EQ(found->release, "6.1.0-before");
  EXPECT_EQ(found->label, "before");
  EXPECT_EQ(ReadFile(found->path), data);
  EXPECT_FALSE(restarted.Find(Sha("something else")).has_value());
}

TEST_F(ArtifactCacheTest, ResumesPartialAfterRestart) {
  const std::string data = RandomBytes(5000, 3);
  const std::string sha = Sha(data);
  const std::string partial = dir_ + "/" + sha + ".partial";
  {
    ArtifactCache cache(dir_, 1 << 20);
    FakeSource dropping(data);
    dropping.fail_after = 1000;
    absl::StatusOr<CachedArtifact> a = cache.Fetch(sha, data.size(), "r", "l", dropping);
    EXPECT_TRUE(absl::IsUnavailable(a.status())) << a.status();
    EXPECT_EQ(ReadFile(partial), data.substr(0, 1000));
    EXPECT_FALSE(cache.Find(sha).has_value());
  }
  ArtifactCache restarted(dir_, 1 << 20);
  FakeSource source(data);
  absl::StatusOr<CachedArtifact> a = restarted.Fetch(sha, data.size(), "r", "l", source);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(source.offsets, std::vector<uint64_t>{1000});
  EXPECT_EQ(ReadFile(a->path), data);
  EXPECT_FALSE(Exists(partial));
}

TEST_F(ArtifactCacheTest, WrongBytesAreDataLossAndLeaveNothing) {
  const std::string data = RandomBytes(3000, 4);
  const std::string sha = Sha(data);
  const std::string wrong = RandomBytes(3000, 5);
  ArtifactCache cache(dir_, 1 << 20);
  FakeSource source(wrong);
  absl::StatusOr<CachedArtifact> a = cache.Fetch(sha, data.size(), "r", "l", source);
  ASSERT_TRUE(absl::IsDataLoss(a.status())) << a.status();
  EXPECT_NE(a.status().message().find(sha), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find(Sha(wrong)), std::string::npos) << a.status();
  EXPECT_FALSE(Exists(dir_ + "/" + sha));
  EXPECT_FALSE(Exists(dir_ + "/" + sha + ".partial"));
  EXPECT_FALSE(Exists(dir_ + "/" + sha + ".meta"));
  EXPECT_FALSE(cache.Find(sha).has_value());
}

TEST_F(ArtifactCacheTest, LongerThanExpectedIsDataLoss) {
  const std::string data = RandomBytes(3000, 6);
  const std::string sha = Sha(data);
  ArtifactCache cache(dir_, 1 << 20);
  FakeSource source(data);
  absl::StatusOr<CachedArtifact> a = cache.Fetch(sha, 2000, "r", "l", source);
  EXPECT_TRUE(absl::IsDataLoss(a.status())) << a.status();
  EXPECT_FALSE(Exists(dir_ + "/" + sha + ".partial"));

  // A .partial already longer than expected (from an earlier, wrong download) likewise.
  WriteFile(dir_ + "/" + sha + ".partial", data);
  a = cache.Fetch(sha, 2000, "r", "l", source);
  EXPECT_TRUE(absl::IsDataLoss(a.status())) << a.status();
  EXPECT_FALSE(Exists(dir_ + "/" + sha + ".partial"));
  EXPECT_FALSE(Exists(dir_ + "/" + sha));
}

TEST_F(ArtifactCacheTest, RejectsMalformedSha256) {
  ArtifactCache cache(dir_, 1 << 20);
  FakeSource source("data");
  const std::string good = Sha("data");
  std::string upper = good;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  for (const std::string& bad : {std::string(""), good.substr(1), good + "0", upper,
                                 "../" + good.substr(3), std::string(64, 'g')}) {
    absl::StatusOr<CachedArtifact> a = cache.Fetch(bad, 4, "r", "l", source);
    EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << bad << ": " << a.status();
    EXPECT_FALSE(cache.Find(bad).has_value()) << bad;
  }
  EXPECT_TRUE(source.offsets.empty());
  EXPECT_TRUE(absl::IsInvalidArgument(cache.Fetch(good, 4, "r\n", "l", source).status()));
}

TEST_F(ArtifactCacheTest, EvictsLeastRecentlyUsed) {
  const std::string first = RandomBytes(1000, 7);
  const std::string second = RandomBytes(1000, 8);
  const std::string third = RandomBytes(1000, 9);
  ArtifactCache cache(dir_, 2500);
  ASSERT_TRUE(FetchData(cache, first, "first").ok());
  ASSERT_TRUE(FetchData(cache, second, "second").ok());
  // Both long ago, the first earlier: without the Find below, the first would go.
  SetMtime(dir_ + "/" + Sha(first), 1000);
  SetMtime(dir_ + "/" + Sha(second), 2000);
  ASSERT_TRUE(cache.Find(Sha(first)).has_value());
  ASSERT_TRUE(FetchData(cache, third, "third").ok());

  EXPECT_TRUE(cache.Find(Sha(first)).has_value());
  EXPECT_FALSE(cache.Find(Sha(second)).has_value());
  EXPECT_FALSE(Exists(dir_ + "/" + Sha(second) + ".meta"));
  EXPECT_TRUE(cache.Find(Sha(third)).has_value());
}

TEST_F(ArtifactCacheTest, KeepsJustFetchedEvenOverBudget) {
  const std::string data = RandomBytes(1000, 10);
  ArtifactCache cache(dir_, 500);
  absl::StatusOr<CachedArtifact> a = FetchData(cache, data, "big");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(ReadFile(a->path), data);
}

TEST_F(ArtifactCacheTest, EvictsAbandonedPartial) {
  const std::string abandoned = RandomBytes(1000, 11);
  const std::string data = RandomBytes(2000, 12);
  ArtifactCache cache(dir_, 2500);
  const std::string partial = dir_ + "/" + Sha(abandoned) + ".partial";
  WriteFile(partial, abandoned.substr(0, 800));
  SetMtime(partial, 1000);
  ASSERT_TRUE(FetchData(cache, data, "new").ok());
  EXPECT_FALSE(Exists(partial));
  EXPECT_TRUE(cache.Find(Sha(data)).has_value());
}

TEST_F(ArtifactCacheTest, ListsVerifiedArtifactsByLabel) {
  const std::string b = RandomBytes(100, 13);
  const std::string a = RandomBytes(200, 14);
  ArtifactCache cache(dir_, 1 << 20);
  ASSERT_TRUE(FetchData(cache, b, "b-label").ok());
  ASSERT_TRUE(FetchData(cache, a, "a-label").ok());
  // Neither a download under way nor stray files are listed.
  const std::string pending = RandomBytes(100, 15);
  WriteFile(dir_ + "/" + Sha(pending) + ".partial", pending.substr(0, 10));
  WriteFile(dir_ + "/notes.txt", "hello");

  std::vector<CachedArtifact> list = ArtifactCache(dir_, 1 << 20).List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].label, "a-label");
  EXPECT_EQ(list[0].release, "6.1.0-a-label");
  EXPECT_EQ(list[0].sha256, Sha(a));
  EXPECT_EQ(list[0].bytes, 200u);
  EXPECT_EQ(list[0].path, dir_ + "/" + Sha(a));
  EXPECT_EQ(list[1].label, "b-label");
  EXPECT_EQ(list[1].sha256, Sha(b));
  EXPECT_EQ(list[1].bytes, 100u);
}

TEST_F(ArtifactCacheTest, OneImageUnderTwoLabelsIsListedUnderBoth) {
  // A bisection's commit whose tree is another's (a change, then its revert) builds the same
  // image under a second label: a board that boots it must say it runs both.
  const std::string image = RandomBytes(300, 21);
  ArtifactCache cache(dir_, 1 << 20);
  ASSERT_TRUE(FetchData(cache, image, "c7").ok());
  FakeSource source(image);
  absl::StatusOr<CachedArtifact> again =
      cache.Fetch(Sha(image), image.size(), "6.1.0-c7", "c9", source);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->labels, (std::vector<std::string>{"c7", "c9"}));
  // A third fetch under a known label adds nothing; the next agent life lists both.
  ASSERT_TRUE(cache.Fetch(Sha(image), image.size(), "6.1.0-c7", "c9", source).ok());
  std::vector<CachedArtifact> list = ArtifactCache(dir_, 1 << 20).List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].label, "c7");
  EXPECT_EQ(list[1].label, "c9");
  EXPECT_EQ(list[0].path, list[1].path);
  EXPECT_EQ(list[1].release, "6.1.0-c7");
}

TEST_F(ArtifactCacheTest, AnImageKeepsItsNewestLabelsOnly) {
  // A nightly schedule on a branch that does not move: one image, a label every night.
  const std::string image = RandomBytes(300, 22);
  ArtifactCache cache(dir_, 1 << 20);
  FakeSource source(image);
  for (size_t night = 0; night < kMaxLabelsPerImage + 5; ++night) {
    ASSERT_TRUE(
        cache.Fetch(Sha(image), image.size(), "6.12.0", absl::StrCat("n+", 100 + night), source)
            .ok());
  }
  std::vector<CachedArtifact> list = ArtifactCache(dir_, 1 << 20).List();
  ASSERT_EQ(list.size(), kMaxLabelsPerImage);
  EXPECT_EQ(list.front().label, "n+105");  // the five oldest nights are gone
  EXPECT_EQ(list.back().label, absl::StrCat("n+", 100 + kMaxLabelsPerImage + 4));
}

}  // namespace
}  // namespace faultline::agent
