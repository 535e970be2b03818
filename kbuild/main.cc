// faultline-kbuild: builds one kernel (tree + ref + config + series, for one arch) into the
// build cache, once per exact key, and prints what it made as key=value lines.
//   faultline-kbuild --tree linux.git --ref v6.12.117 --arch x86_64 --base tinyconfig
//     --fragment deploy/kernel/board.config --series rfc-v5.mbox --include 'arch/x86/*'
// Exit codes: 0 built or found, 2 bad input (unknown ref, a series that does not apply, a
// config without what a board needs), 1 the build failed (log kept, its tail printed).
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "kbuild/builder.h"

namespace {

bool ReadNamed(const std::string& path, faultline::kbuild::NamedText* out) {
  std::optional<std::string> text = faultline::ReadFileToString(path, nullptr);
  if (!text.has_value()) return false;
  out->name = path.substr(path.rfind('/') + 1);
  out->text = *std::move(text);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faultline-kbuild: build a kernel once per (tree, series, arch, compiler, config)"};
  faultline::kbuild::BuildRequest request;
  std::string cache = "/var/cache/faultline-kbuild";
  std::vector<std::string> fragments, series;
  bool quiet = false;
  app.add_option("--tree", request.tree, "git repository of the kernel")->required();
  app.add_option("--ref", request.ref, "tag, branch or commit")->required();
  app.add_option("--arch", request.arch, "x86_64, aarch64 or riscv64")->required();
  app.add_option("--base", request.config_base, "config make target (tinyconfig, defconfig)");
  app.add_option("--fragment", fragments, "config fragment file, merged in order");
  app.add_option("--series", series, "mbox file of patches, applied in order");
  app.add_option("--include", request.include, "apply only paths matching (git apply --include)");
  app.add_option("--cache", cache, "build cache directory");
  app.add_option("-j,--jobs", request.jobs, "make -j (default: CPUs)");
  app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  std::string sandbox_mode = "auto";
  faultline::kbuild::SandboxOptions sandbox;
  app.add_option("--sandbox", sandbox_mode,
                 "auto, required or none-i-trust-every-series (docs/kernels.md)");
  app.add_option("--sandbox-uid", sandbox.uid, "the unprivileged uid the tree's programs run as");
  app.add_flag("--untrusted", request.untrusted,
               "a stranger's series: sandboxed or refused, on a private object directory");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<faultline::kbuild::SandboxMode> mode =
      faultline::kbuild::ParseSandboxMode(sandbox_mode);
  if (!mode.ok()) {
    std::cerr << "faultline-kbuild: --sandbox: " << mode.status().message() << "\n";
    return 2;
  }
  sandbox.mode = *mode;
  for (const auto& [paths, target] :
       {std::pair{&fragments, &request.fragments}, std::pair{&series, &request.series}}) {
    for (const std::string& path : *paths) {
      faultline::kbuild::NamedText named;
      if (!ReadNamed(path, &named)) {
        std::cerr << "faultline-kbuild: cannot read " << path << "\n";
        return 2;
      }
      target->push_back(std::move(named));
    }
  }
  faultline::kbuild::Builder builder(cache, sandbox);
  builder.sandbox().RemoveStaleCgroups();  // of builders that were killed
  auto built = builder.Build(request, [&](const std::string& line) {
    if (!quiet) std::cerr << "kbuild: " << line << "\n";
  });
  if (!built.ok()) {
    std::cerr << "faultline-kbuild: " << built.status().message() << "\n";
    return built.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const auto& a = *built;
  std::cout << "key=" << a.key << "\narch=" << a.arch << "\nrelease=" << a.release
            << "\nbase_commit=" << a.base_commit << "\ntree_hash=" << a.tree_hash
            << "\nconfig_sha256=" << a.config_sha256 << "\ncompiler=" << a.compiler
            << "\nimage=" << a.image << "\nimage_sha256=" << a.image_sha256
            << "\nimage_bytes=" << a.image_bytes << "\nconfig=" << a.config << "\nlog=" << a.log
            << "\ncached=" << (a.cached ? "yes" : "no") << "\nbuild_seconds=" << a.build_seconds
            << "\nseconds=" << a.seconds << "\n";
  for (const std::string& s : a.series) std::cout << "patch=" << s << "\n";
  for (const std::string& w : a.warnings) std::cout << "warning=" << w << "\n";
  return 0;
}
