// The preset table (common/benchmarks.cc) and --preset on the command line.
#include <gtest/gtest.h>

#include <set>

#include "agent/workloads/command_line.h"
#include "common/benchmarks.h"
#include "common/units.h"

namespace faultline::workloads {
namespace {

TEST(Presets, EveryPresetResolvesAndEveryMatrixValueParses) {
  ASSERT_FALSE(Presets().empty());
  for (const auto& preset : Presets()) {
    SCOPED_TRACE(preset.name);
    const BenchmarkSpec* bench = FindBenchmark(preset.benchmark);
    ASSERT_NE(bench, nullptr);
    std::string knob, why;
    auto knobs = ResolveKnobs(*bench, {{"preset", preset.name}}, &knob, &why);
    ASSERT_TRUE(knobs) << knob << ": " << why;
    EXPECT_EQ(knobs->at("preset").text, preset.name);
    for (const auto& [name, value] : preset.params) {
      ASSERT_NE(bench->FindKnob(name), nullptr) << name;
      std::string error;
      EXPECT_TRUE(ParseKnob(*bench->FindKnob(name), value, &error)) << name << ": " << error;
    }
    for (const auto& [name, values] : preset.matrix) {
      const KnobSpec* spec = bench->FindKnob(name);
      ASSERT_NE(spec, nullptr) << name;
      ASSERT_FALSE(values.empty());
      for (const auto& v : values) {
        std::string error;
        EXPECT_TRUE(ParseKnob(*spec, v, &error)) << name << "=" << v << ": " << error;
      }
      EXPECT_EQ(knobs->at(name).text, ParseKnob(*spec, values.front(), &why)->text);
    }
    for (const auto* limit :
         {&preset.memcg.memory_max, &preset.memcg.memory_high, &preset.memcg.swap_max}) {
      if (!limit->empty() && *limit != "max") {
        EXPECT_TRUE(ParseSize(*limit)) << *limit;
      }
    }
    EXPECT_GE(preset.duration_seconds, 1u);
  }
}

TEST(Presets, EachSeedPresetHasASmallVariantThatFitsTwoCores) {
  std::set<std::string> names;
  for (const auto& p : Presets()) names.insert(p.name);
  for (const auto& p : Presets()) {
    if (p.small) {
      EXPECT_EQ(p.name.substr(p.name.size() - 6), "-small") << p.name;
      EXPECT_LE(p.duration_seconds, 10u) << p.name;
      continue;
    }
    EXPECT_TRUE(names.count(p.name + "-small")) << p.name;
  }
  for (const char* issue : {"v2-file-thrash", "v2-swap-in", "v4-swap-writers", "v5-filemap",
                            "v5-swap-writers", "finish-fault-shmem"}) {
    EXPECT_TRUE(names.count(issue)) << issue;
  }
}

TEST(Presets, SeedValuesAreThoseOfTheMails) {
  const PresetSpec* v2 = FindPreset("v2-file-thrash");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->memcg.memory_high, "1G");
  EXPECT_EQ(v2->memcg.memory_max, "1.2G");
  EXPECT_EQ(v2->memcg.swap_max, "0");
  std::string knob, why;
  auto knobs =
      ResolveKnobs(*FindBenchmark("filemap-thrash"), {{"preset", "v2-file-thrash"}}, &knob, &why);
  ASSERT_TRUE(knobs) << why;
  EXPECT_EQ(knobs->at("threads").number, 500u);
  EXPECT_EQ(knobs->at("file_size").number, 16u << 20);

  const PresetSpec* v4 = FindPreset("v4-swap-writers");
  ASSERT_NE(v4, nullptr);
  EXPECT_EQ(v4->duration_seconds, 60u);
  ASSERT_EQ(v4->matrix.size(), 1u);
  EXPECT_EQ(v4->matrix[0].second, (std::vector<std::string>{"0", "2", "4"}));
  EXPECT_EQ(FindPreset("v5-swap-writers")->matrix[0].second,
            (std::vector<std::string>{"0", "4", "8"}));
  EXPECT_EQ(FindPreset("v5-filemap")->matrix[0].second,
            (std::vector<std::string>{"40", "60", "80"}));
  EXPECT_EQ(FindPreset("v2-swap-in")->duration_seconds, 30u);
}

TEST(Presets, ExplicitKnobsWinAndBadPresetsNameTheKnob) {
  const BenchmarkSpec* bench = FindBenchmark("filemap-thrash");
  std::string knob, why;
  auto knobs = ResolveKnobs(*bench, {{"preset", "v2-file-thrash"}, {"threads", "7"}}, &knob, &why);
  ASSERT_TRUE(knobs) << why;
  EXPECT_EQ(knobs->at("threads").number, 7u);
  EXPECT_EQ(knobs->at("file_size").number, 16u << 20);

  EXPECT_FALSE(ResolveKnobs(*bench, {{"preset", "v9-nope"}}, &knob, &why));
  EXPECT_EQ(knob, "preset");
  EXPECT_NE(why.find("v2-file-thrash"), std::string::npos) << why;
  EXPECT_FALSE(ResolveKnobs(*bench, {{"preset", "v2-swap-in"}}, &knob, &why));
  EXPECT_EQ(knob, "preset");
  EXPECT_NE(why.find("is for swap-in"), std::string::npos) << why;
}

TEST(PresetCommandLine, PresetAloneGivesBenchmarkDurationAndLimits) {
  std::string error;
  auto command = ParseWorkloadCommand({"--preset", "v2-file-thrash-small"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->benchmark, "filemap-thrash");
  EXPECT_EQ(command->preset, "v2-file-thrash-small");
  EXPECT_EQ(command->duration_seconds, FindPreset("v2-file-thrash-small")->duration_seconds);
  EXPECT_TRUE(command->own_cgroup);
  EXPECT_EQ(command->limits.memory_max,
            ParseSize(FindPreset("v2-file-thrash-small")->memcg.memory_max));
  EXPECT_EQ(command->limits.swap_max, 0u);
}

TEST(PresetCommandLine, InheritCgroupAndExplicitFlagsOverride) {
  std::string error;
  auto command = ParseWorkloadCommand({"filemap-thrash", "--preset", "v5-filemap-small",
                                       "--threads", "5", "--duration", "2s", "--inherit-cgroup"},
                                      &error);
  ASSERT_TRUE(command) << error;
  EXPECT_FALSE(command->own_cgroup);
  EXPECT_EQ(command->knobs.at("threads").number, 5u);
  EXPECT_EQ(command->knobs.at("munmap_threads").number, 1u);
  EXPECT_EQ(command->duration_seconds, 2u);

  auto limits =
      ParseWorkloadCommand({"--preset", "v2-file-thrash-small", "--memory-max", "200M"}, &error);
  ASSERT_TRUE(limits) << error;
  EXPECT_EQ(limits->limits.memory_max, 200u << 20);
  EXPECT_FALSE(limits->limits.memory_high);  // the caller's limits replace the preset's

  EXPECT_FALSE(ParseWorkloadCommand({"--preset", "nope"}, &error));
  EXPECT_NE(error.find("--preset"), std::string::npos) << error;
  EXPECT_FALSE(ParseWorkloadCommand({"swap-in", "--preset", "v2-file-thrash"}, &error));
  EXPECT_NE(error.find("is for filemap-thrash"), std::string::npos) << error;
}

TEST(PresetCommandLine, ListingIsOneLinePerPresetWithItsMatrix) {
  std::string error;
  auto command = ParseWorkloadCommand({"--list-presets"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_TRUE(command->list_presets);
  const std::string listing = PresetListing();
  EXPECT_NE(listing.find("v4-swap-writers-small mmap-writer-pressure 10 small writers=0,2,4\n"),
            std::string::npos)
      << listing;
  EXPECT_NE(listing.find("v2-file-thrash filemap-thrash 600 full\n"), std::string::npos) << listing;
}

TEST(ShmemFolioFaultKnobs, DefaultsAreTheSeeds) {
  std::string error;
  auto command = ParseWorkloadCommand({"shmem-folio-fault", "--duration", "1s"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->knobs.at("shmem_size").number, 2u << 20);
  EXPECT_EQ(command->knobs.at("vma_size").number, 64u << 10);
  EXPECT_EQ(command->knobs.at("access").text, "write");
  EXPECT_EQ(command->knobs.at("thp").text, "force");
  EXPECT_EQ(command->knobs.at("threads").number, 1u);
}

}  // namespace
}  // namespace faultline::workloads
