#include "kbuild/builder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"
#include "common/sha256.h"
#include "common/strings.h"
#include "kbuild/files.h"
#include "kbuild/kconfig.h"
#include "kbuild/process.h"
#include "kbuild/slot.h"
#include "kbuild/worktree.h"

namespace faultline::kbuild {
namespace fs = std::filesystem;
namespace {

// A file or directory name from free text ("gcc (Debian 12.2.0-14) 12.2.0" ->
// "gcc-debian-12.2.0-14-12.2.0").
std::string Slug(absl::string_view text) {
  std::string out;
  for (char c : text) {
    const bool keep = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
    if (keep) {
      out += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// The recipe's version: part of every key and of every remembered config, so that a
// change of how kernels are built (2: KBUILD_BUILD_VERSION) builds them anew instead of
// taking images made the old way for the new.
constexpr char kRecipe[] = "faultline-kbuild/2";

// The first line of a tool's `--version` ("" when it cannot be run).
std::string VersionLine(const std::string& tool) {
  absl::StatusOr<std::string> out = RunForOutput({{tool, "--version"}});
  if (!out.ok()) return "";
  return std::string(
      absl::StripAsciiWhitespace(absl::string_view(*out).substr(0, out->find('\n'))));
}

// Writes `text` to `path` whole or not at all (a temporary file renamed).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view text) {
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  if (absl::Status s = WriteFile(tmp, text); !s.ok()) return s;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

bool HaveCcache() {
  for (absl::string_view dir : absl::StrSplit(getenv("PATH") ? getenv("PATH") : "", ':')) {
    if (!dir.empty() && ::access(absl::StrCat(dir, "/ccache").c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::vector<std::string> MakeArgv(const std::string& src, const std::string& objdir,
                                  const ArchInfo& arch, std::vector<std::string> extra) {
  std::vector<std::string> argv = {"make", "-C", src, "O=" + objdir, "ARCH=" + arch.make_arch};
  if (!arch.cross_compile.empty()) argv.push_back("CROSS_COMPILE=" + arch.cross_compile);
  for (auto& e : extra) argv.push_back(std::move(e));
  return argv;
}

// The final .config, what the fragments asked for and the text itself.
struct Configured {
  std::string text;
  std::map<std::string, std::string> config, asked;
};

// The config step: base target, fragments, olddefconfig, in the scratch object directory
// `cfg`, each program's output in `log`; refused when the result lacks what a faultline
// board needs.
absl::StatusOr<Configured> Configure(const BuildRequest& request, const ArchInfo& arch,
                                     const std::string& src, const std::string& cfg,
                                     const Slot& slot, const std::string& log, const Say& say) {
  // `cfg` is where the programs see the directory; the builder's files go to cfg_host.
  const std::string& host = slot.cfg_host();
  say(absl::StrCat("config ", request.config_base, " + ", request.fragments.size(),
                   " fragment(s)"));
  if (absl::StatusOr<std::string> r =
          slot.RunForOutput({MakeArgv(src, cfg, arch, {"-s", request.config_base})}, log);
      !r.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config.base: ", r.status().message()));
  }
  Configured out;
  std::map<std::string, std::string>& asked = out.asked;
  std::vector<std::string> merge = {src + "/scripts/kconfig/merge_config.sh", "-m", "-O", cfg,
                                    cfg + "/.config"};
  for (size_t i = 0; i < request.fragments.size(); ++i) {
    const NamedText& fragment = request.fragments[i];
    const std::string name = absl::StrCat("/fragments/", i, "-", Slug(fragment.name));
    const std::string path = cfg + name;
    if (absl::Status s = WriteFile(host + name, fragment.text); !s.ok()) return s;
    for (auto& [k, v] : ParseConfig(fragment.text)) asked[k] = v;
    merge.push_back(path);
  }
  if (!request.fragments.empty()) {
    if (absl::StatusOr<std::string> r = slot.RunForOutput({merge, cfg}, log); !r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config.fragments: ", r.status().message()));
    }
  }
  if (absl::StatusOr<std::string> r =
          slot.RunForOutput({MakeArgv(src, cfg, arch, {"-s", "olddefconfig"})}, log);
      !r.ok()) {
    return r.status();
  }
  absl::StatusOr<std::string> config_text = ReadFile(host + "/.config");
  if (!config_text.ok()) return config_text.status();
  out.text = *std::move(config_text);
  out.config = ParseConfig(out.text);
  const std::map<std::string, std::string>& config = out.config;
  absl::StatusOr<std::string> kconfig_debug = ReadFile(src + "/mm/Kconfig.debug");
  const bool has_vma_stats =
      kconfig_debug.ok() && absl::StrContains(*kconfig_debug, "config PER_VMA_LOCK_STATS");
  const std::vector<std::string> missing =
      MissingOptions(config, BoardRequirements(request.arch, has_vma_stats));
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: the final .config (", request.arch, ", ", request.config_base,
                     " + fragments, after olddefconfig) lacks what a faultline board needs: ",
                     absl::StrJoin(missing, "; ")));
  }
  return out;
}

// The artifact in `final_dir`, whole or not at all: the image, its config and build log
// and the metadata, made aside and renamed into place (a stale kernel there moved aside
// first, whole: a reader of it keeps its files).
absl::Status StoreArtifact(Artifact a, const ArchInfo& arch, const std::string& obj,
                           const std::string& log, const std::string& final_dir,
                           bool replace_stale) {
  std::error_code ec;
  const std::string tmp = absl::StrCat(final_dir, ".tmp-", ::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  const std::string image_name = fs::path(arch.image_path).filename().string() + "-" + a.release;
  fs::copy_file(obj + "/" + arch.image_path, tmp + "/" + image_name, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot copy the image: ", ec.message()));
  fs::copy_file(obj + "/.config", tmp + "/config", ec);
  fs::copy_file(log, tmp + "/build.log", ec);
  absl::StatusOr<std::string> image_sha = Sha256OfFile(tmp + "/" + image_name, &a.image_bytes);
  if (!image_sha.ok()) return image_sha.status();
  a.image_sha256 = *image_sha;
  a.image = final_dir + "/" + image_name;
  if (absl::Status s = WriteFile(tmp + "/" + kMetaFile, ArtifactMeta(a)); !s.ok()) return s;
  if (replace_stale) {
    // The stale kernel goes first (moved aside whole: a reader of it keeps its files).
    const std::string stale = absl::StrCat(final_dir, ".stale-", ::getpid());
    fs::rename(final_dir, stale, ec);
    fs::remove_all(stale, ec);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot store the artifact: ", ec.message()));
  return absl::OkStatus();
}

// The tree's absolute path, once the request's config target and tree are checked.
absl::StatusOr<std::string> CheckedTree(const BuildRequest& request) {
  static const std::string kConfigTargetChars = "abcdefghijklmnopqrstuvwxyz0123456789_.-";
  if (!absl::EndsWith(request.config_base, "config") ||
      request.config_base.find_first_not_of(kConfigTargetChars) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.base: '", request.config_base,
                     "' is not a config make target (tinyconfig, defconfig, allnoconfig, ...)"));
  }
  std::error_code ec;
  std::string tree = fs::absolute(request.tree, ec).lexically_normal().string();
  if (!fs::exists(tree)) {
    return absl::InvalidArgumentError(absl::StrCat("tree: ", request.tree, " does not exist"));
  }
  return tree;
}

absl::StatusOr<std::vector<Patch>> SplitSeries(const std::vector<NamedText>& series) {
  std::vector<Patch> patches;
  for (const NamedText& mbox : series) {
    absl::StatusOr<std::vector<Patch>> split =
        SplitMbox(mbox.text, mbox.name, static_cast<int>(patches.size()) + 1);
    if (!split.ok()) return split.status();
    for (Patch& p : *split) patches.push_back(std::move(p));
  }
  return patches;
}

// The compiler's first line (part of the key) and the versions of every tool the config
// step asks (Kconfig records them: CC_VERSION_TEXT, LD_VERSION, AS_VERSION, PAHOLE_VERSION,
// RUSTC_VERSION).
absl::Status ReadToolchain(const std::string& cross, std::string* compiler,
                           std::string* toolchain) {
  absl::StatusOr<std::string> cc_version = RunForOutput({{cross + "gcc", "--version"}});
  if (!cc_version.ok()) return cc_version.status();
  *compiler = std::string(
      absl::StripAsciiWhitespace(absl::string_view(*cc_version).substr(0, cc_version->find('\n'))));
  *toolchain =
      absl::StrCat(*cc_version, "\n", VersionLine(cross + "ld"), "\n", VersionLine(cross + "as"),
                   "\n", VersionLine("pahole"), "\n", VersionLine("rustc"), "\n");
  return absl::OkStatus();
}

// What make left: the object directory, the build log, the release, the seconds it took.
struct Made {
  std::string obj, log, release;
  double seconds = 0;
};

// make of the image in the object directory of (tree, arch, config), kept between builds so
// the next one is incremental; the release named by the key.
absl::StatusOr<Made> MakeKernel(const std::string& cache, const BuildRequest& request,
                                const ArchInfo& arch, const std::string& src,
                                const std::string& tree_id, const std::string& config_sha,
                                const std::string& config_text, const std::string& key, Slot& slot,
                                const Sandbox& sandbox, const Say& say) {
  std::error_code ec;
  // The object directory of (tree, arch, config): kept, so the next build is incremental
  // (an untrusted build works on a copy of it: slot.h).
  const std::string obj =
      absl::StrCat(cache, "/obj/", tree_id, "-", request.arch, "-", config_sha.substr(0, 16));
  fs::create_directories(obj, ec);
  absl::StatusOr<std::string> obj_config = ReadFile(obj + "/.config");
  if (!obj_config.ok() || *obj_config != config_text) {
    if (absl::Status s = WriteFile(obj + "/.config", config_text); !s.ok()) return s;
  }
  if (absl::Status s = slot.UseObj(obj); !s.ok()) return s;
  const std::string& seen = slot.obj();  // where make sees it
  const std::string localversion = "-fl" + key.substr(0, 10);
  const std::string log = absl::StrCat(cache, "/logs/", key.substr(0, 16), ".log");
  fs::remove(log, ec);
  const int jobs =
      request.jobs > 0 ? request.jobs : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<std::string> extra = {"LOCALVERSION=" + localversion, absl::StrCat("-j", jobs),
                                    arch.image_target};
  if (HaveCcache()) extra.push_back("CC=ccache " + arch.cross_compile + "gcc");
  say(absl::StrCat("make ", arch.image_target, " -j", jobs, " (log ", log, ")"));
  const auto build_started = std::chrono::steady_clock::now();
  absl::StatusOr<Finished> made = slot.Run({MakeArgv(src, seen, arch, extra), "", {}, log});
  if (!made.ok()) return made.status();
  const double build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - build_started).count();
  if (!made->stopped.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("build: make ", arch.image_target, " stopped by the sandbox after ",
                     static_cast<int>(build_seconds), " s: ", made->stopped, "; log kept at ", log,
                     "; last lines:\n", BoundedTail(TailFile(log, 20), 20)));
  }
  if (made->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("build: make ", arch.image_target, " failed (exit ", made->exit_code,
                     ") after ", static_cast<int>(build_seconds), " s; log kept at ", log,
                     "; last lines:\n", BoundedTail(TailFile(log, 20), 20)));
  }
  // The image: there, a regular file, and no larger than the limit.
  struct stat image {};
  const std::string image_path = slot.obj_host() + "/" + arch.image_path;
  const uint64_t image_limit = sandbox.options().limits.image_bytes;
  if (::lstat(image_path.c_str(), &image) != 0 || !S_ISREG(image.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("build: make ", arch.image_target,
                                                      " left no image at ", arch.image_path,
                                                      "; log kept at ", log));
  }
  if (static_cast<uint64_t>(image.st_size) > image_limit) {
    return absl::FailedPreconditionError(
        absl::StrCat("build: the image is ", image.st_size, " bytes, over the limit of ",
                     image_limit, " (", image_limit >> 20, " MiB); log kept at ", log));
  }
  absl::StatusOr<std::string> release_out = slot.RunForOutput(
      {MakeArgv(src, seen, arch, {"-s", "LOCALVERSION=" + localversion, "kernelrelease"})});
  if (!release_out.ok()) return release_out.status();
  std::string release(absl::StripAsciiWhitespace(*release_out));
  // A release names a directory on the board (/lib/modules/...) and a line of a report.
  static const std::string kReleaseChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-~";
  if (release.empty() || release.size() > 128 ||
      release.find_first_not_of(kReleaseChars) != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "build: `make kernelrelease` printed no release of [A-Za-z0-9._+~-], at most 128: \"",
        BoundedTail(release, 1, 128), "\""));
  }
  return Made{slot.obj_host(), log, std::move(release), build_seconds};
}

// The index entry of the config that (tree after the series, arch, toolchain, base,
// fragments) made: found, a kernel built before from the same inputs needs no config step.
std::string IndexEntryPath(const std::string& cache, const BuildRequest& request,
                           const std::string& tree_hash, const std::string& toolchain) {
  std::string inputs = absl::StrCat(kRecipe, "\nconfig\n", tree_hash, "\n", request.arch, "\n",
                                    request.config_base, "\n", toolchain);
  for (const NamedText& fragment : request.fragments) {
    absl::StrAppend(&inputs, "fragment ", Sha256Hex(fragment.text), "\n");
  }
  return absl::StrCat(cache, "/index/", Sha256Hex(inputs));
}

// The kernel the index entry at `path` names, when it is there with the key these inputs
// give; its config's sha256 in *config_sha.
absl::StatusOr<Artifact> IndexedKernel(
    const std::string& path, const std::function<std::string(const std::string&, bool)>& key_of,
    const std::function<std::string(const std::string&)>& dir_of, std::string* config_sha) {
  absl::StatusOr<std::string> entry = ReadFile(path);
  if (!entry.ok()) return entry.status();
  bool names_commit = false;
  for (absl::string_view line : absl::StrSplit(*entry, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "config_sha256=")) *config_sha = std::string(line);
    if (line == "release_names_commit=1") names_commit = true;
  }
  if (!IsSha256Hex(*config_sha)) return absl::NotFoundError(path + ": no config");
  absl::StatusOr<Artifact> found = ReadArtifact(dir_of(*config_sha));
  if (found.ok() && found->key != key_of(*config_sha, names_commit)) {
    return absl::NotFoundError(path + ": another key");
  }
  return found;
}

absl::Status WriteIndexEntry(const std::string& path, const std::string& config_sha,
                             bool names_commit, const std::string& tree_hash,
                             const BuildRequest& request) {
  return WriteFileAtomically(
      path, absl::StrCat("config_sha256=", config_sha,
                         "\nrelease_names_commit=", names_commit ? 1 : 0, "\ntree_hash=", tree_hash,
                         "\narch=", request.arch, "\nbase=", request.config_base, "\n"));
}

}  // namespace

std::string ArtifactMeta(const Artifact& a) {
  std::string out;
  auto line = [&](absl::string_view k, absl::string_view v) {
    absl::StrAppend(&out, k, "=", v, "\n");
  };
  line("key", a.key);
  line("arch", a.arch);
  line("base_commit", a.base_commit);
  line("tree_hash", a.tree_hash);
  line("config_sha256", a.config_sha256);
  line("compiler", a.compiler);
  line("release", a.release);
  line("image", fs::path(a.image).filename().string());
  line("image_sha256", a.image_sha256);
  line("image_bytes", absl::StrCat(a.image_bytes));
  line("build_seconds", absl::StrCat(a.build_seconds));
  for (const std::string& s : a.series) line("patch", OneLine(s));
  for (const std::string& w : a.warnings) line("warning", OneLine(w));
  return out;
}

absl::StatusOr<ArchInfo> ArchFor(const std::string& arch) {
  const bool native_x86 = fs::exists("/usr/bin/x86_64-linux-gnu-gcc") && sizeof(void*) == 8 &&
#if defined(__x86_64__)
                          true;
#else
                          false;
#endif
  if (arch == "x86_64") {
    return ArchInfo{"x86_64", native_x86 ? "" : "x86_64-linux-gnu-", "bzImage",
                    "arch/x86/boot/bzImage"};
  }
  if (arch == "aarch64")
    return ArchInfo{"arm64", "aarch64-linux-gnu-", "Image", "arch/arm64/boot/Image"};
  if (arch == "riscv64")
    return ArchInfo{"riscv", "riscv64-linux-gnu-", "Image", "arch/riscv/boot/Image"};
  return absl::InvalidArgumentError(
      absl::StrCat("arch: '", arch, "' is not one faultline builds (x86_64, aarch64, riscv64)"));
}

absl::StatusOr<Artifact> ReadArtifact(const std::string& dir) {
  absl::StatusOr<std::string> meta = ReadFile(dir + "/" + kMetaFile);
  if (!meta.ok()) return absl::NotFoundError(absl::StrCat("no built kernel in ", dir));
  Artifact a;
  a.dir = dir;
  a.config = dir + "/config";
  a.log = dir + "/build.log";
  for (absl::string_view line : absl::StrSplit(*meta, '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view k = line.substr(0, eq);
    const std::string v(line.substr(eq + 1));
    if (k == "key") a.key = v;
    if (k == "arch") a.arch = v;
    if (k == "base_commit") a.base_commit = v;
    if (k == "tree_hash") a.tree_hash = v;
    if (k == "config_sha256") a.config_sha256 = v;
    if (k == "compiler") a.compiler = v;
    if (k == "release") a.release = v;
    if (k == "image") a.image = dir + "/" + v;
    if (k == "image_sha256") a.image_sha256 = v;
    if (k == "image_bytes" && !absl::SimpleAtoi(v, &a.image_bytes)) a.image_bytes = 0;
    if (k == "build_seconds" && !absl::SimpleAtod(v, &a.build_seconds)) a.build_seconds = 0;
    if (k == "patch") a.series.push_back(v);
    if (k == "warning") a.warnings.push_back(v);
  }
  return a;
}

Builder::Builder(std::string cache, SandboxOptions sandbox)
    : cache_(std::move(cache)), sandbox_(std::move(sandbox)) {}

// The config step's scratch directory emptied, and its programs' log (kept until the next
// config of this tree and arch) started afresh: returns the log's path.
static std::string FreshConfigStep(const std::string& cache, const std::string& cfg,
                                   const std::string& tree_id, const std::string& arch) {
  std::error_code ec;
  fs::remove(cfg + "/.config", ec);
  fs::remove_all(cfg + "/fragments", ec);
  fs::create_directories(cfg + "/fragments", ec);
  const std::string log = absl::StrCat(cache, "/logs/config-", tree_id, "-", arch, ".log");
  fs::create_directories(cache + "/logs", ec);
  fs::remove(log, ec);
  return log;
}

absl::StatusOr<Artifact> Builder::Build(const BuildRequest& request,
                                        const std::function<void(const std::string&)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  absl::StatusOr<ArchInfo> arch = ArchFor(request.arch);
  if (!arch.ok()) return arch.status();
  // Whether the tree's programs run sandboxed: decided (or refused) before anything runs.
  absl::StatusOr<bool> sandboxed = UseSandbox(sandbox_, request.untrusted, say);
  if (!sandboxed.ok()) return sandboxed.status();
  absl::StatusOr<std::string> checked = CheckedTree(request);
  if (!checked.ok()) return checked.status();
  const std::string tree = *checked;
  std::error_code ec;

  // The series first: a malformed mbox fails before anything is touched.
  absl::StatusOr<std::vector<Patch>> split = SplitSeries(request.series);
  if (!split.ok()) return split.status();
  const std::vector<Patch> patches = *std::move(split);

  absl::StatusOr<std::string> commit = RunForOutput(
      {GitArgv(tree, {"rev-parse", "--verify", "--quiet", request.ref + "^{commit}"})});
  if (!commit.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ref: '", request.ref, "' is not a commit in ", request.tree));
  }
  const std::string base_commit(absl::StripAsciiWhitespace(*commit));

  const std::string tree_id = Sha256Hex(tree).substr(0, 12);
  MakeCacheDirs(cache_, *sandboxed);
  const std::string src = absl::StrCat(cache_, "/src/", tree_id, "-", request.arch);
  // One build at a time per (tree, arch): it owns the worktree (a waiter says for whom).
  const std::string lock_path =
      absl::StrCat(cache_, "/locks/", tree_id, "-", request.arch, ".lock");
  FileLock tree_lock(lock_path);
  if (absl::Status locked = LockWorktree(tree_lock, lock_path, request, tree, patches.size(), say);
      !locked.ok()) {
    return locked;
  }

  // The worktree at the base commit; files that do not change keep their mtimes.
  say(absl::StrCat("checkout ", request.ref, " (", base_commit.substr(0, 12), ")"));
  if (absl::Status s = CheckOut(tree, src, base_commit); !s.ok()) return s;

  // Reverts, each the commit's own diff applied backwards into the index.
  const std::string scratch = absl::StrCat(cache_, "/locks/", tree_id, "-", request.arch);
  if (absl::Status s = ApplyReverts(request, tree, src, scratch, say); !s.ok()) return s;

  // The series, patch by patch, into the index (so write-tree sees it).
  absl::StatusOr<std::vector<std::string>> subjects =
      ApplySeries(patches, request, src, scratch, say);
  if (!subjects.ok()) return subjects.status();
  absl::StatusOr<std::string> tree_hash_out = RunForOutput({GitArgv(src, {"write-tree"})});
  if (!tree_hash_out.ok()) return tree_hash_out.status();
  const std::string tree_hash(absl::StripAsciiWhitespace(*tree_hash_out));

  // The compiler and the other tools the config step asks.
  const std::string cross = arch->cross_compile;
  std::string compiler, toolchain;
  if (absl::Status s = ReadToolchain(cross, &compiler, &toolchain); !s.ok()) return s;

  // The key: tree, arch, compiler, final .config (+ base commit if the release names it).
  auto key_of = [&](const std::string& config_sha, bool release_names_commit) {
    return Sha256Hex(absl::StrCat(kRecipe, "\n", tree_hash, "\n", request.arch, "\n", compiler,
                                  "\n", config_sha, "\n",
                                  release_names_commit ? "commit " + base_commit + "\n" : ""));
  };
  auto dir_of = [&](const std::string& config_sha) {
    return absl::StrCat(cache_, "/kernels/", request.arch, "/", Slug(compiler), "/", config_sha,
                        "/", tree_hash);
  };

  // A kernel built before from the same inputs is found without the config step (index/).
  const std::string remembered = IndexEntryPath(cache_, request, tree_hash, toolchain);
  std::string indexed_sha;
  if (absl::StatusOr<Artifact> hit = IndexedKernel(remembered, key_of, dir_of, &indexed_sha);
      hit.ok()) {
    hit->cached = true;
    hit->seconds = elapsed();
    say(absl::StrCat("cached: ", hit->release, " (key ", hit->key.substr(0, 12), "; config ",
                     indexed_sha.substr(0, 12), " remembered, no make)"));
    return hit;
  }
  auto remember = [&](const std::string& config_sha, bool names_commit) {
    return WriteIndexEntry(remembered, config_sha, names_commit, tree_hash, request);
  };

  // The config: base target, fragments, olddefconfig, in a scratch object directory.
  const std::string cfg = absl::StrCat(cache_, "/cfg/", tree_id, "-", request.arch);
  const std::string config_log = FreshConfigStep(cache_, cfg, tree_id, request.arch);
  absl::StatusOr<std::unique_ptr<Slot>> slot =
      OpenSlot(*sandboxed ? &sandbox_ : nullptr, request.untrusted, cache_, src, cfg, say);
  if (!slot.ok()) return slot.status();
  absl::StatusOr<Configured> configured =
      Configure(request, *arch, src, (*slot)->cfg(), **slot, config_log, say);
  if (!configured.ok()) return configured.status();
  const std::string* config_text = &configured->text;
  const std::map<std::string, std::string>& config = configured->config;
  const std::map<std::string, std::string>& asked = configured->asked;
  const std::string config_sha = Sha256Hex(*config_text);
  const auto auto_version = config.find("LOCALVERSION_AUTO");
  const bool names_commit = auto_version != config.end() && auto_version->second == "y";
  const std::string key = key_of(config_sha, names_commit);
  const std::string final_dir = dir_of(config_sha);
  absl::StatusOr<Artifact> found = ReadArtifact(final_dir);
  if (found.ok() && found->key == key) {
    if (absl::Status s = remember(config_sha, names_commit); !s.ok()) return s;
    found->cached = true;
    found->seconds = elapsed();
    say(absl::StrCat("cached: ", found->release, " (key ", key.substr(0, 12), ")"));
    return found;
  }
  if (found.ok()) {
    // Made by another recipe (or, for a release that names the commit, from another commit
    // with the same tree): built again in its place.
    say(absl::StrCat("the kernel in ", final_dir, " has key ", found->key.substr(0, 12), ", not ",
                     key.substr(0, 12), ": built again"));
  }

  absl::StatusOr<Made> made = MakeKernel(cache_, request, *arch, src, tree_id, config_sha,
                                         *config_text, key, **slot, sandbox_, say);
  if (!made.ok()) return made.status();

  // The artifact, whole or not at all.
  Artifact a;
  a.key = key;
  a.arch = request.arch;
  a.base_commit = base_commit;
  a.tree_hash = tree_hash;
  a.config_sha256 = config_sha;
  a.compiler = compiler;
  a.release = made->release;
  a.build_seconds = made->seconds;
  a.series = *subjects;
  a.warnings = DroppedFragmentOptions(asked, config);
  if (absl::Status s = StoreArtifact(a, *arch, made->obj, made->log, final_dir, found.ok());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Artifact> stored = ReadArtifact(final_dir);
  if (!stored.ok()) return stored.status();
  if (absl::Status s = remember(config_sha, names_commit); !s.ok()) return s;
  stored->seconds = elapsed();
  say(absl::StrCat("built ", stored->release, " in ", static_cast<int>(made->seconds), " s: ",
                   stored->image_bytes, " bytes, sha256 ", stored->image_sha256.substr(0, 12)));
  return stored;
}

}  // namespace faultline::kbuild
