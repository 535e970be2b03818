// faultline-bisect-sim: simulated bisections, the engine next to git bisect on the median
// of 3 runs, over the same histories (docs/bisect.md, "Simulation").
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

#include "bisect/simulation.h"

int main(int argc, char** argv) {
  using faultline::bisect::Scenario;
  CLI::App app{"Simulated bisections: wrong-culprit rate, steps and runs"};
  int count = 1000;
  uint64_t seed = 1;
  faultline::bisect::Options options;
  app.add_option("--count", count, "bisections per scenario")->check(CLI::Range(1, 1000000));
  app.add_option("--seed", seed, "seed of the histories and the noise");
  app.add_option("--error", options.error, "SPRT alpha = beta per step");
  app.add_option("--max-pairs", options.max_pairs, "pairs per step before it is skipped");
  app.add_option("--min-pairs", options.min_pairs, "pairs before a step may decide");
  app.add_option("--endpoint-min-pairs", options.endpoint_min_pairs,
                 "pairs before the endpoints may decide");
  app.add_option("--endpoint-precision", options.endpoint_precision,
                 "endpoint CI half-width / effect");
  app.add_option("--endpoint-max-pairs", options.endpoint_max_pairs,
                 "pairs before the endpoints are declared not different");
  app.add_option("--min-effect", options.min_effect,
                 "smallest |bad/good - 1| worth bisecting (endpoints' early stop)");
  int only = -1;
  app.add_option("--scenario", only, "run only this scenario (0: no effect, 1: 5% effect, ...)");
  CLI11_PARSE(app, argc, argv);
  std::printf(
      "differ: the endpoints said good and bad differ; ends: their pairs (mean); with no\n"
      "effect, every named culprit is wrong and \"missed\" is the right answer\n");

  const std::vector<Scenario> scenarios = {
      {.name = "no effect, 10% noise", .effect = 0},
      {.name = "5% effect, 10% noise"},
      {.name = "... + drift 2%/100 runs", .drift_per_run = -0.0002},
      {.name = "... + 3 commits do not build", .broken = 3},
      {.name = "... + drift + 3 do not build", .drift_per_run = -0.0002, .broken = 3},
  };
  std::printf("%d bisections of 64 commits per scenario (seed %llu), SPRT error %.4g per step\n\n",
              count, static_cast<unsigned long long>(seed), options.error);
  std::printf("%-30s %-14s %6s %6s %6s %6s %5s %5s %6s %5s\n", "scenario", "method", "wrong",
              "ambig", "missed", "differ", "steps", "max", "runs", "ends");
  for (size_t i = 0; i < scenarios.size(); ++i) {
    if (only >= 0 && static_cast<size_t>(only) != i) continue;
    const Scenario& s = scenarios[i];
    const auto c = faultline::bisect::Simulate(s, options, count, seed);
    auto row = [&](const char* method, const faultline::bisect::Summary& m, bool engine) {
      char differ[16] = "-";
      if (engine) std::snprintf(differ, sizeof differ, "%.1f%%", 100.0 * m.differ / m.bisections);
      const std::string ends = engine ? std::to_string(std::lround(m.mean_endpoint_pairs)) : "-";
      std::printf("%-30s %-14s %5.1f%% %5.1f%% %5.1f%% %6s %5.2f %5d %6.0f %5s\n", s.name.c_str(),
                  method, 100.0 * m.wrong / m.bisections, 100.0 * m.ambiguous / m.bisections,
                  100.0 * m.missed / m.bisections, differ, m.mean_steps, m.max_steps, m.mean_runs,
                  ends.c_str());
    };
    row("faultline", c.engine, true);
    if (s.effect == 0) continue;  // a plain git bisect always names a commit
    row("median-of-3", c.median_of_3, false);
    row(("median-of-" + std::to_string(c.same_budget_runs)).c_str(), c.same_budget, false);
  }
  return 0;
}
