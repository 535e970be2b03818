// faultline: the command-line client of the faultline controller (see cli.h).
#include "services/cli/cli.h"

int main(int argc, char** argv) {
  return faultline::cli::Main(argc, argv);
}
