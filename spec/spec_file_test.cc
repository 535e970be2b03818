#include "spec/spec_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace faultline::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<std::string> Values(const v1::JobSpec& spec, const std::string& key) {
  auto it = spec.matrix().find(key);
  if (it == spec.matrix().end()) return {"<missing>"};
  return {it->second.values().begin(), it->second.values().end()};
}

// The error message of a spec that must not load.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(text, "spec.yaml");
  EXPECT_FALSE(spec.ok()) << "loaded: " << spec->DebugString();
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(SpecFileTest, LoadsTheIssueExample) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(R"(benchmark: filemap-thrash
duration: 5s
repetitions: 3
kernels: [vanilla]
memcg: {memory_max: 256M, memory_high: 192M, swap_max: 0}
params: {file_size: 16M}
matrix: {threads: [4, 8]}
)",
                                                           "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->benchmark(), "filemap-thrash");
  EXPECT_EQ(spec->duration(), "5s");
  EXPECT_EQ(spec->repetitions(), 3u);
  EXPECT_THAT(spec->kernels(), ElementsAre("vanilla"));
  EXPECT_EQ(spec->memcg().memory_max(), "256M");
  EXPECT_EQ(spec->memcg().memory_high(), "192M");
  EXPECT_EQ(spec->memcg().swap_max(), "0");  // scalars keep their text in string fields
  ASSERT_EQ(spec->params().size(), 1u);
  EXPECT_EQ(spec->params().at("file_size"), "16M");
  EXPECT_THAT(Values(*spec, "threads"), ElementsAre("4", "8"));
  EXPECT_TRUE(spec->arches().empty());
  EXPECT_EQ(spec->name(), "");
}

TEST(SpecFileTest, EventsInFlowAndBlockStyle) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(
      "benchmark: filemap-thrash\nevents: [mmap_lock:mmap_lock_start_locking, sw:page-faults]\n",
      "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->events(), ElementsAre("mmap_lock:mmap_lock_start_locking", "sw:page-faults"));
  spec = LoadJobSpecFromString("events:\n  - exceptions:page_fault_user\n  - sw:context-switches\n",
                               "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->events(), ElementsAre("exceptions:page_fault_user", "sw:context-switches"));
  // "a: b" is a map in YAML: the error says where.
  EXPECT_THAT(ErrorOf("events: [sw: page-faults]\n"), StartsWith("spec.yaml:1:"));
}

TEST(SpecFileTest, BlockStyleAndEveryField) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(R"(# nightly A/B
name: "swap-in A/B"
benchmark: swap-in
duration: 30s
repetitions: 10
kernels:
  - vanilla
  - patched
arches: [x86_64, aarch64]
boards: []
memcg:
  memory_max: 1.2G
params:
  region: 128M
  readers: 12
matrix:
  pageout_threads: 1
  writers:
    - 0
    - 2
)",
                                                           "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "swap-in A/B");
  EXPECT_EQ(spec->repetitions(), 10u);
  EXPECT_THAT(spec->kernels(), ElementsAre("vanilla", "patched"));
  EXPECT_THAT(spec->arches(), ElementsAre("x86_64", "aarch64"));
  EXPECT_TRUE(spec->boards().empty());
  EXPECT_EQ(spec->memcg().memory_max(), "1.2G");
  EXPECT_EQ(spec->params().at("readers"), "12");
  EXPECT_THAT(Values(*spec, "pageout_threads"), ElementsAre("1"));  // scalar form
  EXPECT_THAT(Values(*spec, "writers"), ElementsAre("0", "2"));     // sequence form
}

TEST(SpecFileTest, MatrixAcceptsTheExplicitMessageForm) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(
      "benchmark: swap-in\nmatrix: {writers: {values: [4, 8]}}\n", "spec.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(Values(*spec, "writers"), ElementsAre("4", "8"));
}

TEST(SpecFileTest, NullValuesLeaveFieldsUnset) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFromString("benchmark: swap-in\nname:\nmemcg: ~\n", "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "");
  EXPECT_FALSE(spec->has_memcg());
}

// run_options is one message in the file too; a field it lacks is named with its fields.
TEST(SpecFileTest, RunOptionsAreOneMessage) {
  auto spec = LoadJobSpecFromString(
      "benchmark: swap-in\nrun_options:\n  events: [sw:page-faults]\n  mmap_lock_waits: true\n"
      "  profile: {frequency_hz: 997}\n",
      "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->run_options().events(), ElementsAre("sw:page-faults"));
  EXPECT_TRUE(spec->run_options().mmap_lock_waits());
  EXPECT_EQ(spec->run_options().profile().frequency_hz(), 997u);
  EXPECT_EQ(ErrorOf("run_options:\n  event: [sw:page-faults]\n"),
            "spec.yaml:2:3: run_options: unknown field 'event' in RunOptions (fields: events, "
            "mmap_lock_waits, profile); did you mean 'events'?");
}

TEST(SpecFileTest, UnknownFieldGivesLineColumnAndTheFields) {
  EXPECT_EQ(ErrorOf("duration: 5s\nrepetitions: 3\nbenchmrk: swap-in\n"),
            "spec.yaml:3:1: unknown field 'benchmrk' in JobSpec (fields: benchmark, duration, "
            "repetitions, "
            "kernels, memcg, params, matrix, arches, boards, name, baseline, block_size, "
            "shuffle_seed, alpha, "
            "min_effect, kernel_overrides, max_repetitions, target_ci_half_width, each_board, "
            "run_options, events, kernel_sources, mmap_lock_waits, profile); did "
            "you mean "
            "'benchmark'?");
}

// Found by tests/fuzz/fuzz_job_spec: yaml-cpp 0.7 spun on an unclosed flow map (1.9 GB, no
// end). Refused up front, naming where the '{' was opened.
TEST(SpecFileTest, UnclosedFlowCollectionIsRefusedBeforeYamlCpp) {
  const std::string fuzzed =
      "#\"Small version of the swap-in mo v2 0/5]\" (seed: 100 MiB anonymous regio\n,5 n# th the "
      "boardame: swap-in-small\nbenchmon uark: n: 10s\nrep(etitions: 3\nkernels: [vanilla]\nmemcg:"
      "\xdd{memory_max:\xe9\xca\xce\xcd\xb2\xd3\xdf\x8cwa=p_max: ma non:  wr\nit";
  EXPECT_EQ(ErrorOf(fuzzed), "spec.yaml:6:7: invalid YAML: not UTF-8");
  // The same without the stray bytes: the unclosed '{' itself.
  std::string ascii = fuzzed;
  ascii.erase(std::remove_if(ascii.begin(), ascii.end(),
                             [](char c) { return static_cast<unsigned char>(c) >= 0x80; }),
              ascii.end());
  EXPECT_EQ(ErrorOf(ascii), "spec.yaml:6:7: invalid YAML: this '{' or '[' is never closed");
  EXPECT_EQ(ErrorOf("benchmark: swap-in\nmatrix: {writers: [0, 2\n"),
            "spec.yaml:2:19: invalid YAML: this '{' or '[' is never closed");
  EXPECT_EQ(ErrorOf(std::string("name: mma\0\0\0\x02p-writer\nbenchmark: swap-in\n", 37)),
            "spec.yaml:1:10: invalid YAML: control character 0x00");
  EXPECT_EQ(ErrorOf("name: caf\xc3\xa9 ok\nbenchmark: \x90\x9e\x8d\xa4w\n"),
            "spec.yaml:2:12: invalid YAML: not UTF-8");
  EXPECT_EQ(ErrorOf("name: \xed\xa0\x80\n"),
            "spec.yaml:1:7: invalid YAML: not UTF-8");  // a surrogate
  EXPECT_EQ(ErrorOf(",\r\r\r\r:\r\r\r\r\r\r"),
            "spec.yaml:1:2: invalid YAML: control character 0x0d");
  EXPECT_TRUE(LoadJobSpecFromString("benchmark: swap-in\r\nkernels: [vanilla]\r\n", "x").ok());
  // yaml-cpp's LoadAll never returned on this one; one document is read with Load.
  EXPECT_FALSE(LoadJobSpecFromString("\n,i", "x").ok());
  EXPECT_EQ(ErrorOf("matrix: " + std::string(40, '[') + std::string(40, ']') + "\n"),
            "spec.yaml:1:41: invalid YAML: flow collections nested deeper than 32");
  // Brackets inside quotes, comments and block scalars are text, not flow collections.
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(
      "name: |\n  a { study [ with\n  braces\nbenchmark: swap-in  # a { comment\n"
      "kernels: ['van{lla', \"p[t\\\"ched\"]\n",
      "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "a { study [ with\nbraces\n");
  EXPECT_EQ(spec->kernels(1), "p[t\"ched");
}

TEST(SpecFileTest, ComparisonSettings) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFromString(
      "benchmark: swap-in\nkernels: [vanilla, patched]\nbaseline: vanilla\nblock_size: 2\n"
      "shuffle_seed: 18446744073709551615\nalpha: 0.05\nmin_effect: 0.02\n",
      "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->baseline(), "vanilla");
  EXPECT_EQ(spec->block_size(), 2u);
  EXPECT_EQ(spec->shuffle_seed(), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(spec->alpha(), 0.05);
  EXPECT_DOUBLE_EQ(spec->min_effect(), 0.02);
}

TEST(SpecFileTest, ProfileIsOptionalAndEmptyMeansTheDefaults) {
  absl::StatusOr<v1::JobSpec> none = LoadJobSpecFromString("benchmark: swap-in\n", "x");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_profile());
  absl::StatusOr<v1::JobSpec> empty =
      LoadJobSpecFromString("benchmark: swap-in\nprofile: {}\n", "x");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->has_profile()) << "profile: {} asks for the default rate";
  absl::StatusOr<v1::JobSpec> given =
      LoadJobSpecFromString("benchmark: swap-in\nprofile: {frequency_hz: 997, pmu: true}\n", "x");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->profile().frequency_hz(), 997u);
  EXPECT_TRUE(given->profile().pmu());
}

TEST(SpecFileTest, UnknownNestedFieldNamesThePath) {
  EXPECT_THAT(
      ErrorOf("benchmark: swap-in\nmemcg:\n  memory_max: 1G\n  swapmax: 0\n"),
      StartsWith(
          "spec.yaml:4:3: memcg: unknown field 'swapmax' in MemcgLimits (fields: memory_max, "
          "memory_high, swap_max); did you mean 'swap_max'?"));
}

TEST(SpecFileTest, NoSuggestionForUnrelatedNames) {
  EXPECT_THAT(ErrorOf("zzzzzz: 1\n"), ::testing::Not(HasSubstr("did you mean")));
}

TEST(SpecFileTest, WrongScalarTypeGivesLineColumn) {
  EXPECT_EQ(ErrorOf("benchmark: swap-in\nrepetitions: abc\n"),
            "spec.yaml:2:14: repetitions: expected a non-negative integer, got 'abc'");
  EXPECT_EQ(ErrorOf("repetitions: -1\n"),
            "spec.yaml:1:14: repetitions: expected a non-negative integer, got '-1'");
  EXPECT_EQ(ErrorOf("repetitions: 3.5\n"),
            "spec.yaml:1:14: repetitions: expected a non-negative integer, got '3.5'");
  EXPECT_EQ(ErrorOf("repetitions: 4294967296\n"),
            "spec.yaml:1:14: repetitions: '4294967296' is out of range for uint32");
}

TEST(SpecFileTest, WrongShapeGivesLineColumn) {
  EXPECT_EQ(ErrorOf("benchmark: swap-in\nkernels: vanilla\n"),
            "spec.yaml:2:10: kernels: expected a sequence (e.g. [a, b]), got 'vanilla'");
  EXPECT_EQ(ErrorOf("memcg: 256M\n"),
            "spec.yaml:1:8: memcg: expected a map of MemcgLimits fields, got '256M'");
  EXPECT_EQ(ErrorOf("benchmark: [a, b]\n"),
            "spec.yaml:1:12: benchmark: expected a scalar (string), got a sequence");
  EXPECT_EQ(ErrorOf("params: [file_size]\n"),
            "spec.yaml:1:9: params: expected a map (e.g. {key: value}), got a sequence");
  EXPECT_EQ(ErrorOf("params: {file_size: {a: 1}}\n"),
            "spec.yaml:1:21: params.file_size: expected a scalar (string), got a map");
  EXPECT_EQ(ErrorOf("matrix:\n  threads: [4, [8]]\n"),
            "spec.yaml:2:16: matrix.threads[1]: expected a scalar (string), got a sequence");
  EXPECT_EQ(ErrorOf("matrix: {threads: }\n"), "spec.yaml:1:19: matrix.threads: missing value");
  EXPECT_EQ(ErrorOf("kernels: [a, ~]\n"), "spec.yaml:1:14: kernels[1]: missing value");
}

TEST(SpecFileTest, DuplicateKeysAreErrors) {
  EXPECT_EQ(ErrorOf("benchmark: a\nbenchmark: b\n"), "spec.yaml:2:1: duplicate field 'benchmark'");
  EXPECT_EQ(ErrorOf("params:\n  x: 1\n  x: 2\n"), "spec.yaml:3:3: params: duplicate key 'x'");
}

TEST(SpecFileTest, MalformedYamlGivesLineColumn) {
  EXPECT_THAT(ErrorOf("benchmark: swap-in\nkernels: [vanilla, patched\nduration: 5s\n"),
              ::testing::MatchesRegex("spec\\.yaml:[0-9]+:[0-9]+: invalid YAML: .+"));
  EXPECT_THAT(ErrorOf("benchmark: swap-in\n  duration: 5s\n"),
              StartsWith("spec.yaml:2:11: invalid YAML: "));
}

TEST(SpecFileTest, TopLevelMustBeOneMap) {
  EXPECT_EQ(ErrorOf(""), "spec.yaml:1:1: empty document; expected a map of JobSpec fields");
  EXPECT_EQ(ErrorOf("# nothing\n"),
            "spec.yaml:1:1: empty document; expected a map of JobSpec fields");
  EXPECT_EQ(ErrorOf("- benchmark: x\n"),
            "spec.yaml:1:1: expected a map of JobSpec fields, got a sequence");
  EXPECT_THAT(ErrorOf("benchmark: a\n---\nbenchmark: b\n"),
              HasSubstr("expected one YAML document, found 2"));
}

TEST(SpecFileTest, LoadsOtherMessageTypesGenerically) {
  // Numbers, bools, enums and repeated messages, through the same reflection code.
  v1::GetJobResponse response;
  absl::Status status = LoadMessageFromYaml(R"(
job: {id: 42, state: JOB_STATE_RUNNING, runs: {total: 6, running: 1}}
runs:
  - {id: 7, job_id: 42, throughput_rounds_per_second: 17303.09, cell: {threads: 4}}
  - {id: 8, state: RUN_STATE_FAILED}
)",
                                            "r.yaml", &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.job().id(), 42);
  EXPECT_EQ(response.job().state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(response.job().runs().total(), 6u);
  ASSERT_EQ(response.runs_size(), 2);
  EXPECT_DOUBLE_EQ(response.runs(0).throughput_rounds_per_second(), 17303.09);
  EXPECT_EQ(response.runs(0).cell().at("threads"), "4");
  EXPECT_EQ(response.runs(1).state(), v1::RUN_STATE_FAILED);

  v1::GetJobRequest request;
  EXPECT_EQ(LoadMessageFromYaml("include_runs: maybe\n", "q.yaml", &request).message(),
            "q.yaml:1:15: include_runs: expected true or false, got 'maybe'");
  EXPECT_TRUE(LoadMessageFromYaml("include_runs: yes\njob_id: 9\n", "q.yaml", &request).ok());
  EXPECT_TRUE(request.include_runs());
  EXPECT_THAT(
      std::string(LoadMessageFromYaml("job: {state: DONE}\n", "r.yaml", &response).message()),
      StartsWith(
          "r.yaml:1:14: job.state: expected one of JOB_STATE_UNSPECIFIED, JOB_STATE_QUEUED"));
  EXPECT_EQ(LoadMessageFromYaml("job: {id: x1}\n", "r.yaml", &response).message(),
            "r.yaml:1:11: job.id: expected an integer, got 'x1'");
}

TEST(SpecFileTest, LoadsFromFile) {
  const std::string path = ::testing::TempDir() + "/faultline_spec_file_test.yaml";
  {
    std::ofstream out(path);
    out << "benchmark: filemap-thrash\nbenchmark_typo: 1\n";
  }
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith(path + ":2:1: unknown field 'benchmark_typo'"));
  std::remove(path.c_str());

  spec = LoadJobSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), StartsWith(path + ": cannot open: "));
}

// A directory of its own per test, for spec files and the files they name.
class KernelSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("faultline_spec_kernels_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    const std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }

  // Loads `text` as the file spec.yaml in the test's directory.
  absl::StatusOr<v1::JobSpec> LoadSpec(const std::string& text) {
    return LoadJobSpecFile(Write("spec.yaml", text));
  }

  // The error of a spec file that must not load, without the "<path>:" in front.
  std::string SpecError(const std::string& text) {
    absl::StatusOr<v1::JobSpec> spec = LoadSpec(text);
    EXPECT_FALSE(spec.ok()) << "loaded: " << spec->DebugString();
    if (spec.ok()) return "";
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(spec.status().message());
    const std::string prefix = (dir_ / "spec.yaml").string() + ":";
    EXPECT_THAT(message, StartsWith(prefix));
    return message.substr(std::min(message.size(), prefix.size()));
  }

  std::filesystem::path dir_;
};

TEST_F(KernelSourcesTest, SequenceFormIsUnchanged) {
  absl::StatusOr<v1::JobSpec> spec = LoadSpec("benchmark: swap-in\nkernels: [vanilla, patched]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernels(), ElementsAre("vanilla", "patched"));
  EXPECT_TRUE(spec->kernel_sources().empty());
  spec = LoadSpec("kernels:\n  - vanilla\n  - patched\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernels(), ElementsAre("vanilla", "patched"));
  EXPECT_TRUE(spec->kernel_sources().empty());
}

TEST_F(KernelSourcesTest, TreeFromSeriesIncludeAndFragmentsInFileOrder) {
  Write("lab.config", "CONFIG_SWAP=y\n");
  Write("configs/debug.config", "CONFIG_DEBUG_VM=y\n");
  Write("rfc-v5.mbox", "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH 1/2] mm: x\n");
  Write("series/fixup.mbox", "From 5678 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] mm: y\n");
  absl::StatusOr<v1::JobSpec> spec = LoadSpec(R"(benchmark: swap-in
kernels:
  vanilla: {tree: /srv/linux.git, ref: v6.12.117,
            config: {base: tinyconfig, fragments: [lab.config, configs/debug.config]}}
  patched:
    from: vanilla
    series: [rfc-v5.mbox, series/fixup.mbox]
    include: ["arch/x86/*", "mm/*"]
  stock: {}
  defaults: {tree: /srv/linux.git, ref: master, config: defconfig, revert: [8bfde8e52983],
             untrusted: true}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernel_sources().at("defaults").revert(), ElementsAre("8bfde8e52983"));
  EXPECT_TRUE(spec->kernel_sources().at("defaults").untrusted());
  EXPECT_FALSE(spec->kernel_sources().at("vanilla").untrusted());
  // The labels in the file's order (not sorted: the sources are a map).
  EXPECT_THAT(spec->kernels(), ElementsAre("vanilla", "patched", "stock", "defaults"));
  ASSERT_EQ(spec->kernel_sources().size(), 3u);
  EXPECT_FALSE(spec->kernel_sources().contains("stock"));

  const v1::KernelSource& vanilla = spec->kernel_sources().at("vanilla");
  EXPECT_EQ(vanilla.tree(), "/srv/linux.git");
  EXPECT_EQ(vanilla.ref(), "v6.12.117");
  EXPECT_EQ(vanilla.config_base(), "tinyconfig");
  ASSERT_EQ(vanilla.fragments_size(), 2);
  EXPECT_EQ(vanilla.fragments(0).name(), "lab.config");
  EXPECT_EQ(vanilla.fragments(0).content(), "CONFIG_SWAP=y\n");
  EXPECT_EQ(vanilla.fragments(1).name(), "debug.config");  // the base name
  EXPECT_EQ(vanilla.fragments(1).content(), "CONFIG_DEBUG_VM=y\n");
  EXPECT_TRUE(vanilla.from().empty());
  EXPECT_TRUE(vanilla.series().empty());

  const v1::KernelSource& patched = spec->kernel_sources().at("patched");
  EXPECT_EQ(patched.from(), "vanilla");
  EXPECT_TRUE(patched.tree().empty());
  ASSERT_EQ(patched.series_size(), 2);
  EXPECT_EQ(patched.series(0).name(), "rfc-v5.mbox");
  EXPECT_THAT(patched.series(0).content(), HasSubstr("Subject: [PATCH 1/2] mm: x"));
  EXPECT_EQ(patched.series(1).name(), "fixup.mbox");
  EXPECT_THAT(patched.include(), ElementsAre("arch/x86/*", "mm/*"));

  const v1::KernelSource& defaults = spec->kernel_sources().at("defaults");
  EXPECT_EQ(defaults.config_base(), "defconfig");  // config as a string: the base
  EXPECT_TRUE(defaults.fragments().empty());
}

TEST_F(KernelSourcesTest, AbsolutePathsAndTextWithoutAFile) {
  const std::string mbox = Write("abs.mbox", "patch\n");
  // Absolute paths as given.
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFromString("kernels: {p: {from: v, series: [" + mbox + "]}, v: {}}\n", "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernels(), ElementsAre("p", "v"));
  EXPECT_EQ(spec->kernel_sources().at("p").series(0).name(), "abs.mbox");
  // Text without a file (stdin): relative paths from the current directory.
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  spec = LoadJobSpecFromString("kernels: {p: {from: v, series: [abs.mbox]}, v: {}}\n", "x");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kernel_sources().at("p").series(0).content(), "patch\n");
}

TEST_F(KernelSourcesTest, PrebuiltImage) {
  const std::string sha(64, 'a');
  absl::StatusOr<v1::JobSpec> spec = LoadSpec(
      "kernels:\n  stock: installed\n"
      "  other: {image: https://example.org/bzImage, "
      "sha256: " +
      sha + ", release: 6.12.0-x}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernels(), ElementsAre("stock", "other"));
  ASSERT_EQ(spec->kernel_sources().size(), 1u);
  const v1::KernelSource& other = spec->kernel_sources().at("other");
  EXPECT_EQ(other.image(), "https://example.org/bzImage");
  EXPECT_EQ(other.image_sha256(), sha);
  EXPECT_EQ(other.image_release(), "6.12.0-x");
  EXPECT_TRUE(other.tree().empty());
}

TEST_F(KernelSourcesTest, InstalledKernelsAreLabelsOnly) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadSpec("kernels:\n  a: {}\n  b: installed\n  c:\n  d: ~\nbaseline: b\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->kernels(), ElementsAre("a", "b", "c", "d"));
  EXPECT_TRUE(spec->kernel_sources().empty());
  EXPECT_EQ(spec->baseline(), "b");
}

TEST_F(KernelSourcesTest, FileOverTheSizeLimit) {
  Write("big.mbox", std::string(v1::kMaxKernelFileBytes * 3 / 2, 'x'));
  EXPECT_EQ(SpecError("kernels:\n  vanilla: {}\n  patched: {from: vanilla, series: [big.mbox]}\n"),
            "3:37: kernels.patched.series[0]: big.mbox is 1.5 MiB, over the 1 MiB limit for one "
            "file");
  Write("edge.config", std::string(v1::kMaxKernelFileBytes + 1, 'x'));
  EXPECT_EQ(SpecError("kernels:\n  v: {tree: /t, ref: r, config: {fragments: [edge.config]}}\n"),
            "2:46: kernels.v.config.fragments[0]: edge.config is 1048577 bytes, over the 1 MiB "
            "limit for one file");
  // Exactly the limit is fine.
  Write("full.mbox", std::string(v1::kMaxKernelFileBytes, 'x'));
  EXPECT_TRUE(LoadSpec("kernels: {v: {tree: /t, ref: r, series: [full.mbox]}}\n").ok());
}

TEST_F(KernelSourcesTest, FilesOverTheJobLimit) {
  Write("one.mbox", std::string(1'000'000, 'x'));
  // 8 files of 1,000,000 bytes fit in 8 MiB; the job's 9th does not, whichever label has it.
  EXPECT_EQ(SpecError("kernels:\n"
                      "  a: {tree: /t, ref: r, series: [one.mbox, one.mbox, one.mbox, one.mbox, "
                      "one.mbox]}\n"
                      "  b: {from: a, series: [one.mbox, one.mbox, one.mbox, one.mbox]}\n"),
            "3:55: kernels.b.series[3]: one.mbox (976.6 KiB) brings the job's files to 8.6 MiB, "
            "over the 8 MiB limit for all files of a job");
}

TEST_F(KernelSourcesTest, TooManyFilesForOneKernel) {
  Write("p.mbox", "patch\n");
  std::string series;
  for (int i = 0; i < v1::kMaxKernelFilesPerLabel; ++i)
    series += (i ? ", " : "") + std::string("p.mbox");
  EXPECT_TRUE(LoadSpec("kernels: {v: {tree: /t, ref: r, series: [" + series + "]}}\n").ok());
  Write("f.config", "CONFIG_X=y\n");
  EXPECT_EQ(SpecError("kernels:\n  v: {tree: /t, ref: r, config: {fragments: [f.config]}, "
                      "series: [" +
                      series + "]}\n"),
            "2:6: kernels.v: 33 files (config.fragments and series), over the limit of 32 files "
            "per kernel");
}

TEST_F(KernelSourcesTest, UnreadableFilesNameTheFieldAndThePath) {
  EXPECT_EQ(SpecError("kernels:\n  p: {from: v, series: [missing.mbox]}\n  v: {}\n"),
            "2:25: kernels.p.series[0]: cannot read missing.mbox (" +
                (dir_ / "missing.mbox").string() + "): No such file or directory");
  std::filesystem::create_directories(dir_ / "adir");
  EXPECT_EQ(SpecError("kernels: {v: {tree: /t, config: {fragments: [adir]}}}\n"),
            "1:46: kernels.v.config.fragments[0]: cannot read adir (" + (dir_ / "adir").string() +
                "): is a directory");
  // Devices and FIFOs could block or never end: regular files only.
  EXPECT_EQ(SpecError("kernels: {v: {tree: /t, series: [/dev/zero]}}\n"),
            "1:34: kernels.v.series[0]: cannot read /dev/zero: not a regular file");
}

TEST_F(KernelSourcesTest, UnknownKeysAndWrongShapes) {
  EXPECT_EQ(SpecError("kernels:\n  vanilla: {tree: /srv/linux.git, refs: v6.12}\n"),
            "2:35: kernels.vanilla: unknown key 'refs' (tree, ref, config, from, series, "
            "include, revert, image, sha256, arch, release, untrusted)");
  EXPECT_EQ(SpecError("kernels:\n  v: {tree: /t, config: {base: defconfig, fragment: [a]}}\n"),
            "2:43: kernels.v.config: unknown key 'fragment' (base, fragments)");
  EXPECT_EQ(SpecError("kernels: {v: stock}\n"),
            "1:14: kernels.v: expected a map of the kernel's source (tree, ref, config, from, "
            "series, include, revert, image, sha256, arch, release, untrusted) or 'installed', "
            "got 'stock'");
  EXPECT_EQ(SpecError("kernels: {v: {tree: /t, untrusted: maybe}}\n"),
            "1:36: kernels.v.untrusted: must be true or false, not 'maybe'");
  EXPECT_EQ(SpecError("kernels: {v: {tree: [a]}}\n"),
            "1:21: kernels.v.tree: expected a scalar (string), got a sequence");
  EXPECT_EQ(SpecError("kernels: {v: {from: a, series: x.mbox}}\n"),
            "1:32: kernels.v.series: expected a sequence (e.g. [a, b]), got 'x.mbox'");
  EXPECT_EQ(SpecError("kernels: {v: {from: a, include: [mm, ~]}}\n"),
            "1:38: kernels.v.include[1]: missing value");
  EXPECT_EQ(SpecError("kernels:\n  v: {}\n  v: installed\n"), "3:3: kernels: duplicate key 'v'");
  EXPECT_EQ(SpecError("kernels: {v: {tree: /t, tree: /u}}\n"),
            "1:25: kernels.v: duplicate key 'tree'");
  // The sources in one place: not also in kernel_sources.
  EXPECT_THAT(SpecError("kernels: {v: {tree: /t}}\nkernel_sources: {v: {tree: /u}}\n"),
              StartsWith("2:1: kernel_sources: kernels is a map of kernel sources already"));
  EXPECT_THAT(SpecError("kernel_sources: {v: {tree: /u}}\nkernels: {v: {tree: /t}}\n"),
              StartsWith("2:1: kernels: a map of kernel sources, but kernel_sources is given"));
}

}  // namespace
}  // namespace faultline::spec
