#include "common/benchmarks.h"

#include "common/units.h"

namespace faultline {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kMaxThreads = 4096;

KnobSpec Integer(std::string name, std::string def, uint64_t min, uint64_t max, std::string help) {
  return {std::move(name), KnobType::kInteger, std::move(def), min, max, {}, std::move(help)};
}
KnobSpec Size(std::string name, std::string def, uint64_t min, uint64_t max, std::string help) {
  return {std::move(name), KnobType::kSize, std::move(def), min, max, {}, std::move(help)};
}
KnobSpec Choice(std::string name, std::string def, std::vector<std::string> choices,
                std::string help) {
  return {std::move(name),    KnobType::kChoice, std::move(def), 0, 0,
          std::move(choices), std::move(help)};
}
KnobSpec Warmup() {
  return {"warmup",
          KnobType::kDuration,
          "0s",
          0,
          3'600'000,
          {},
          "seconds run before measuring starts (the seeds measure from the start)"};
}

using Matrix = std::vector<std::pair<std::string, std::vector<std::string>>>;

// [PATCH v2 0/5]: the file thrash and its swap-in model.
void AddV2Presets(std::vector<PresetSpec>* all) {
  // [PATCH v2 0/5] mm: reduce mmap_lock contention ...: 500 threads x 16 MiB files under
  // systemd-run -p MemoryHigh=1G -p MemoryMax=1.2G -p MemorySwapMax=0, RUN_SECONDS 600.
  all->push_back(
      {"v2-file-thrash",
       "filemap-thrash",
       "[PATCH v2 0/5] (file thrash)",
       "500 threads, one sparse 16M file each, memcg high 1G / max 1.2G / swap 0, 600 s",
       {{"threads", "500"}, {"file_size", "16M"}, {"munmap_threads", "0"}, {"file_fill", "sparse"}},
       {},
       {"1.2G", "1G", "0"},
       600,
       false});
  // -small variants measure after a warm-up (2 s; 1 s for the shmem one): a 10 s run cannot
  // amortise the start (files not yet cached, a region not yet swapped out) the way the
  // seeds' 30-600 s runs do, and the first seconds dominated their run-to-run variation.
  all->push_back({"v2-file-thrash-small",
                  "filemap-thrash",
                  "[PATCH v2 0/5] (file thrash)",
                  "16 threads x 16M files (256M of page cache) under memcg high 64M / max 96M / "
                  "swap 0, 2 s warm-up + 10 s: thrashes like the seed on 2 cores",
                  {{"threads", "16"},
                   {"file_size", "16M"},
                   {"munmap_threads", "0"},
                   {"file_fill", "sparse"},
                   {"warmup", "2s"}},
                  {},
                  {"96M", "64M", "0"},
                  10,
                  true});
  // Its swap-in model: 100 MiB anonymous region (memset 0), 5 MADV_PAGEOUT threads,
  // 5 readers, 30 s, no memcg.
  all->push_back(
      {"v2-swap-in",
       "swap-in",
       "[PATCH v2 0/5] (swap-in model)",
       "100M zero-filled region, 5 pageout threads, 5 readers, 30 s",
       {{"region_size", "100M"}, {"pageout_threads", "5"}, {"readers", "5"}, {"fill", "zero"}},
       {},
       {},
       30,
       false});
  all->push_back({"v2-swap-in-small",
                  "swap-in",
                  "[PATCH v2 0/5] (swap-in model)",
                  "64M zero-filled region, 2 pageout threads, 2 readers, 2 s warm-up + 10 s",
                  {{"region_size", "64M"},
                   {"pageout_threads", "2"},
                   {"readers", "2"},
                   {"fill", "zero"},
                   {"warmup", "2s"}},
                  {},
                  {},
                  10,
                  true});
}

// [RFC PATCH v4 3/3]: swap-in under mmap writers.
void AddV4Presets(std::vector<PresetSpec>* all) {
  // [RFC PATCH v4 3/3]: 1 pressure thread, 128 MiB non-zero region in a memcg, 12 readers,
  // 0/2/4 mmap writers, 60 s, 2 GiB swap. The memcg values are not in the mail: a limit
  // that holds the region (the table's rates need it mostly resident).
  all->push_back(
      {"v4-swap-writers",
       "mmap-writer-pressure",
       "[RFC PATCH v4 3/3]",
       "128M non-zero region, 1 pressure thread, 12 readers, 0/2/4 writers, 60 s",
       {{"region_size", "128M"}, {"pageout_threads", "1"}, {"readers", "12"}, {"fill", "nonzero"}},
       Matrix{{"writers", {"0", "2", "4"}}},
       {"512M", "", "max"},
       60,
       false});
  all->push_back({"v4-swap-writers-small",
                  "mmap-writer-pressure",
                  "[RFC PATCH v4 3/3]",
                  "64M non-zero region, 1 pressure thread, 2 readers, 0/2/4 writers, 2 s + 10 s",
                  {{"region_size", "64M"},
                   {"pageout_threads", "1"},
                   {"readers", "2"},
                   {"fill", "nonzero"},
                   {"warmup", "2s"}},
                  Matrix{{"writers", {"0", "2", "4"}}},
                  {"256M", "", "max"},
                  10,
                  true});
}

// [RFC PATCH v5]: filemap with parallel munmap, swap-in under writers.
void AddV5Presets(std::vector<PresetSpec>* all) {
  // [RFC PATCH v5]: filemap at 40/60/80 threads with parallel munmap (count and limits not
  // in the mail: 4 munmap threads, the v2 limits); swap-in at 0/4/8 writers.
  all->push_back({"v5-filemap",
                  "filemap-thrash",
                  "[RFC PATCH v5] (filemap)",
                  "40/60/80 threads x 16M files, 4 munmap threads, memcg high 1G / max 1.2G / "
                  "swap 0, 60 s",
                  {{"file_size", "16M"}, {"munmap_threads", "4"}, {"file_fill", "sparse"}},
                  Matrix{{"threads", {"40", "60", "80"}}},
                  {"1.2G", "1G", "0"},
                  60,
                  false});
  all->push_back(
      {"v5-filemap-small",
       "filemap-thrash",
       "[RFC PATCH v5] (filemap)",
       "4/6/8 threads x 16M files, 1 munmap thread, memcg high 64M / max 80M / "
       "swap 0, 2 s warm-up + 10 s",
       {{"file_size", "16M"}, {"munmap_threads", "1"}, {"file_fill", "sparse"}, {"warmup", "2s"}},
       Matrix{{"threads", {"4", "6", "8"}}},
       {"80M", "64M", "0"},
       10,
       true});
  all->push_back(
      {"v5-swap-writers",
       "mmap-writer-pressure",
       "[RFC PATCH v5] (swap)",
       "128M non-zero region, 1 pressure thread, 12 readers, 0/4/8 writers, 60 s",
       {{"region_size", "128M"}, {"pageout_threads", "1"}, {"readers", "12"}, {"fill", "nonzero"}},
       Matrix{{"writers", {"0", "4", "8"}}},
       {"512M", "", "max"},
       60,
       false});
  all->push_back({"v5-swap-writers-small",
                  "mmap-writer-pressure",
                  "[RFC PATCH v5] (swap)",
                  "64M non-zero region, 1 pressure thread, 2 readers, 0/4/8 writers, 2 s + 10 s",
                  {{"region_size", "64M"},
                   {"pageout_threads", "1"},
                   {"readers", "2"},
                   {"fill", "nonzero"},
                   {"warmup", "2s"}},
                  Matrix{{"writers", {"0", "4", "8"}}},
                  {"256M", "", "max"},
                  10,
                  true});
}

// Re: [PATCH] mm: map maximum pages possible in finish_fault.
void AddFinishFaultPresets(std::vector<PresetSpec>* all) {
  // Re: [PATCH] mm: map maximum pages possible in finish_fault: a 2M shmem folio, a 64K
  // (and a 32K) VMA over it, write the first 8 pages (the reproducer's `j < 8` loop, for
  // both VMA sizes), MADV_DONTNEED, 1,000,000 iterations.
  all->push_back({"finish-fault-shmem",
                  "shmem-folio-fault",
                  "Re: [PATCH] mm: map maximum pages possible in finish_fault",
                  "2M memfd as one PMD folio (shmem THP forced on), 64K/32K VMA, write its "
                  "first 8 pages, MADV_DONTNEED, 10 s",
                  {{"threads", "1"},
                   {"shmem_size", "2M"},
                   {"thp", "force"},
                   {"access", "write"},
                   {"touch_pages", "8"}},
                  Matrix{{"vma_size", {"64K", "32K"}}},
                  {},
                  10,
                  false});
  all->push_back({"finish-fault-shmem-small",
                  "shmem-folio-fault",
                  "Re: [PATCH] mm: map maximum pages possible in finish_fault",
                  "as finish-fault-shmem (one thread on 2M already), 1 s warm-up + 5 s",
                  {{"threads", "1"},
                   {"shmem_size", "2M"},
                   {"thp", "force"},
                   {"access", "write"},
                   {"touch_pages", "8"},
                   {"warmup", "1s"}},
                  Matrix{{"vma_size", {"64K", "32K"}}},
                  {},
                  5,
                  true});
}

std::vector<PresetSpec> BuildPresets() {
  std::vector<PresetSpec> all;
  AddV2Presets(&all);
  AddV4Presets(&all);
  AddV5Presets(&all);
  AddFinishFaultPresets(&all);
  return all;
}

KnobSpec PresetKnob(const std::string& benchmark, const std::vector<PresetSpec>& presets) {
  KnobSpec knob{std::string(kPresetKnob),
                KnobType::kChoice,
                std::string(kNoPreset),
                0,
                0,
                {std::string(kNoPreset)},
                "a seed study's knob values as defaults (explicit knobs win)"};
  for (const auto& p : presets) {
    if (p.benchmark == benchmark) knob.choices.push_back(p.name);
  }
  return knob;
}

std::vector<BenchmarkSpec> BuildCatalogue() {
  std::vector<BenchmarkSpec> all;
  all.push_back(BenchmarkSpec{
      "filemap-thrash",
      "each thread maps its own file MAP_SHARED read-only, reads one byte per page, unmaps; "
      "one round = one pass over one file",
      false,
      {
          Integer("threads", "500", 1, kMaxThreads, "faulting threads, one file each"),
          Size("file_size", "16M", 4 * kKiB, 4 * kGiB, "size of each thread's file"),
          Integer("munmap_threads", "0", 0, kMaxThreads,
                  "extra threads mapping and unmapping their file in a loop (mmap_lock "
                  "write churn)"),
          Choice("file_fill", "sparse", {"sparse", "written"},
                 "sparse: ftruncate only (as the seed); written: data written once before"),
          Warmup(),
      }});
  all.push_back(BenchmarkSpec{
      "swap-in",
      "readers fault a swapped-out anonymous region back in while pageout threads push it "
      "out with MADV_PAGEOUT; one round = one reader pass over the region",
      true,
      {
          Size("region_size", "100M", 1 * kMiB, 64 * kGiB, "anonymous region size"),
          Integer("readers", "5", 1, kMaxThreads, "reader threads"),
          Integer("pageout_threads", "5", 0, kMaxThreads, "threads looping MADV_PAGEOUT"),
          Choice("fill", "zero", {"zero", "nonzero"}, "initial contents of the region"),
          Warmup(),
      }});
  all.push_back(BenchmarkSpec{
      "mmap-writer-pressure",
      "swap-in readers while writer threads mmap/munmap small regions to take mmap_lock for "
      "write; one round = one reader pass over the region",
      true,
      {
          Size("region_size", "128M", 1 * kMiB, 64 * kGiB, "anonymous region size"),
          Integer("readers", "12", 1, kMaxThreads, "reader threads"),
          Integer("pageout_threads", "1", 0, kMaxThreads, "pressure threads (MADV_PAGEOUT)"),
          Integer("writers", "0", 0, 1024, "mmap writer threads"),
          Size("writer_map_size", "64K", 4 * kKiB, 1 * kGiB, "size each writer maps and unmaps"),
          Choice("fill", "nonzero", {"zero", "nonzero"}, "initial contents of the region"),
          Warmup(),
      }});
  all.push_back(BenchmarkSpec{
      "shmem-folio-fault",
      "a memfd populated as one large (PMD) folio, a small VMA over its start: touch each "
      "page, MADV_DONTNEED; one round = one iteration (touch + zap)",
      false,
      {
          Integer("threads", "1", 1, kMaxThreads, "threads, each with its own memfd"),
          Size("shmem_size", "2M", 4 * kKiB, 1 * kGiB,
               "memfd size, populated as one folio of this size when shmem THP allows"),
          Size("vma_size", "64K", 4 * kKiB, 1 * kGiB,
               "the small VMA mapped over the memfd's start (the seed: 64K, and 32K)"),
          Choice("thp", "force", {"force", "advise", "never"},
                 "force: set this size's shmem_enabled to always for the run (the seed, needs "
                 "root; restored after); advise: MADV_HUGEPAGE, the board's setting decides; "
                 "never: MADV_NOHUGEPAGE (small folios)"),
          Choice("access", "write", {"write", "read"},
                 "write: store one byte per page (the seed, finish_fault); read: load"),
          Integer("touch_pages", "0", 0, 1 << 18,
                  "pages touched per iteration from the VMA's start; 0 = every page"),
          Choice("fault_timing", "on", {"on", "off"},
                 "on: time the touch loop alone per iteration (the seed's clock_gettime "
                 "pair; fault_ns_per_iteration)"),
          Warmup(),
      }});
  const auto& presets = Presets();
  for (auto& b : all) b.knobs.push_back(PresetKnob(b.name, presets));
  return all;
}

}  // namespace

const KnobSpec* BenchmarkSpec::FindKnob(std::string_view knob) const {
  for (const auto& k : knobs) {
    if (k.name == knob) return &k;
  }
  return nullptr;
}

const std::vector<BenchmarkSpec>& Benchmarks() {
  static const std::vector<BenchmarkSpec> kAll = BuildCatalogue();
  return kAll;
}

const BenchmarkSpec* FindBenchmark(std::string_view name) {
  for (const auto& b : Benchmarks()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const std::vector<PresetSpec>& Presets() {
  static const std::vector<PresetSpec> kAll = BuildPresets();
  return kAll;
}

const PresetSpec* FindPreset(std::string_view name) {
  for (const auto& p : Presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string PresetNames() {
  std::string out;
  for (const auto& p : Presets()) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

std::string BenchmarkNames() {
  std::string out;
  for (const auto& b : Benchmarks()) {
    if (!out.empty()) out += ", ";
    out += b.name;
  }
  return out;
}

std::optional<KnobValue> ParseKnob(const KnobSpec& knob, std::string_view text,
                                   std::string* error) {
  switch (knob.type) {
    case KnobType::kInteger: {
      auto v = ParseUnsigned(text);
      if (!v) {
        *error = "must be a whole number between " + std::to_string(knob.min) + " and " +
                 std::to_string(knob.max) + ", got '" + std::string(text) + "'";
        return std::nullopt;
      }
      if (*v < knob.min || *v > knob.max) {
        *error = "must be between " + std::to_string(knob.min) + " and " +
                 std::to_string(knob.max) + ", got " + std::to_string(*v);
        return std::nullopt;
      }
      return KnobValue{std::to_string(*v), *v};
    }
    case KnobType::kSize: {
      std::string why;
      auto v = ParseSize(text, &why);
      if (!v) {
        *error = why;
        return std::nullopt;
      }
      if (*v < knob.min || *v > knob.max) {
        *error = "must be between " + FormatSize(knob.min) + " and " + FormatSize(knob.max) +
                 ", got " + std::string(text);
        return std::nullopt;
      }
      return KnobValue{FormatSize(*v), *v};
    }
    case KnobType::kDuration: {
      std::string why;
      auto v = ParseDuration(text, &why);
      if (!v) {
        *error = why;
        return std::nullopt;
      }
      auto ms = static_cast<uint64_t>(v->count());
      if (ms < knob.min || ms > knob.max) {
        *error = "must be between " + FormatDuration(std::chrono::milliseconds(knob.min)) +
                 " and " + FormatDuration(std::chrono::milliseconds(knob.max)) + ", got " +
                 std::string(text);
        return std::nullopt;
      }
      return KnobValue{FormatDuration(*v), ms};
    }
    case KnobType::kChoice: {
      for (const auto& c : knob.choices) {
        if (c == text) return KnobValue{c, 0};
      }
      std::string list;
      for (const auto& c : knob.choices) list += (list.empty() ? "" : ", ") + c;
      *error = "must be one of " + list + ", got '" + std::string(text) + "'";
      return std::nullopt;
    }
  }
  *error = "unsupported knob type";
  return std::nullopt;
}

std::optional<std::map<std::string, KnobValue>> ResolveKnobs(
    const BenchmarkSpec& benchmark, const std::map<std::string, std::string>& given,
    std::string* error_knob, std::string* error) {
  for (const auto& [name, value] : given) {
    if (benchmark.FindKnob(name) == nullptr) {
      *error_knob = name;
      std::string list;
      for (const auto& k : benchmark.knobs) list += (list.empty() ? "" : ", ") + k.name;
      *error = "unknown knob for " + benchmark.name + " (knobs: " + list + ")";
      return std::nullopt;
    }
  }
  // Defaults: the catalogue's, then the preset's (fixed knobs, first matrix values).
  std::map<std::string, std::string> defaults;
  for (const auto& knob : benchmark.knobs) defaults[knob.name] = knob.default_value;
  if (auto it = given.find(std::string(kPresetKnob));
      it != given.end() && it->second != kNoPreset) {
    const PresetSpec* preset = FindPreset(it->second);
    if (preset == nullptr || preset->benchmark != benchmark.name) {
      *error_knob = std::string(kPresetKnob);
      std::string list;
      for (const auto& p : Presets()) {
        if (p.benchmark == benchmark.name) list += (list.empty() ? "" : ", ") + p.name;
      }
      *error =
          preset == nullptr
              ? "unknown preset '" + it->second + "' (" + benchmark.name + " presets: " + list + ")"
              : "preset '" + it->second + "' is for " + preset->benchmark + ", not " +
                    benchmark.name + " (" + benchmark.name + " presets: " + list + ")";
      return std::nullopt;
    }
    for (const auto& [name, value] : preset->params) defaults[name] = value;
    for (const auto& [name, values] : preset->matrix) {
      if (!values.empty()) defaults[name] = values.front();
    }
  }
  std::map<std::string, KnobValue> out;
  for (const auto& knob : benchmark.knobs) {
    auto it = given.find(knob.name);
    const std::string& text = it != given.end() ? it->second : defaults.at(knob.name);
    std::string why;
    auto v = ParseKnob(knob, text, &why);
    if (!v) {
      *error_knob = knob.name;
      *error = why;
      return std::nullopt;
    }
    out.emplace(knob.name, std::move(*v));
  }
  return out;
}

}  // namespace faultline
