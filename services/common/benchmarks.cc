#include "services/common/benchmarks.h"

#include "services/common/units.h"

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
  return {std::move(name), KnobType::kChoice, std::move(def), 0, 0, std::move(choices),
          std::move(help)};
}
KnobSpec Warmup() {
  return {"warmup", KnobType::kDuration, "0s", 0, 3'600'000, {},
          "seconds run before measuring starts (the seeds measure from the start)"};
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

std::string BenchmarkNames() {
  std::string out;
  for (const auto& b : Benchmarks()) {
    if (!out.empty()) out += ", ";
    out += b.name;
  }
  return out;
}

std::optional<KnobValue> ParseKnob(const KnobSpec& knob, std::string_view text, std::string* error) {
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
  std::map<std::string, KnobValue> out;
  for (const auto& knob : benchmark.knobs) {
    auto it = given.find(knob.name);
    const std::string& text = it != given.end() ? it->second : knob.default_value;
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
