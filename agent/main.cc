// faultline-agent: wiring only.
#include "CLI/CLI.hpp"
#include "agent/app.h"

int main(int argc, char** argv) {
  faultline::agent::AgentOptions options;
  CLI::App app{"faultline-agent: runs faultline benchmarks on this board"};
  app.add_option("--controller", options.controller,
                 "controller gRPC address HOST:PORT, or several IP:PORT separated by commas "
                 "(the first that answers; the next when it goes away)")
      ->capture_default_str();
  app.add_option("--config", options.config_path, "board configuration (agent.yaml)")->required();
  app.add_option("--workload-binary", options.workload_binary,
                 "path of faultline-workload (default: next to this binary)");
  app.add_flag("--clear-needs-check", options.clear_needs_check,
               "after checking the board by hand: clear its needs-check state and exit");
  CLI11_PARSE(app, argc, argv);
  return faultline::agent::RunAgent(options, argv[0]);
}
