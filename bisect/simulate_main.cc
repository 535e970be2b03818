// faultline-bisect-sim: simulated bisections, the engine next to git bisect on the median
// of 3 runs, over the same histories (docs/bisect.md, "Simulation").
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
  CLI11_PARSE(app, argc, argv);

  const std::vector<Scenario> scenarios = {
      {.name = "5% effect, 10% noise"},
      {.name = "... + drift 2%/100 runs", .drift_per_run = -0.0002},
      {.name = "... + 3 commits do not build", .broken = 3},
      {.name = "... + drift + 3 do not build", .drift_per_run = -0.0002, .broken = 3},
  };
  std::printf("%d bisections of 64 commits per scenario (seed %llu), SPRT error %.4g per step\n\n",
              count, static_cast<unsigned long long>(seed), options.error);
  std::printf("%-32s %-14s %7s %7s %7s %7s %9s %9s\n", "scenario", "method", "wrong", "ambig",
              "missed", "steps", "max steps", "runs");
  for (const auto& s : scenarios) {
    const auto c = faultline::bisect::Simulate(s, options, count, seed);
    auto row = [&](const char* method, const faultline::bisect::Summary& m) {
      std::printf("%-32s %-14s %6.1f%% %6.1f%% %6.1f%% %7.2f %9d %9.0f\n", s.name.c_str(), method,
                  100.0 * m.wrong / m.bisections, 100.0 * m.ambiguous / m.bisections,
                  100.0 * m.missed / m.bisections, m.mean_steps, m.max_steps, m.mean_runs);
    };
    row("faultline", c.engine);
    row("median-of-3", c.median_of_3);
    row(("median-of-" + std::to_string(c.same_budget_runs)).c_str(), c.same_budget);
  }
  return 0;
}
