#include "bisect/request.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "faultline/v1/values.h"
#include "kbuild/process.h"

namespace faultline::bisect {
namespace {

constexpr int kMaxCommits = 4096;

absl::Status Usage(const std::string& what) {
  return absl::InvalidArgumentError(what);
}

absl::StatusOr<std::string> Git(const std::string& tree, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", tree});
  kbuild::Command command;
  command.argv = std::move(args);
  absl::StatusOr<kbuild::Finished> run = kbuild::Run(command);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::FailedPreconditionError(
        std::string(absl::StripAsciiWhitespace(kbuild::Tail(run->output, 3))));
  }
  return run->output;
}

absl::StatusOr<std::string> CommitOf(const std::string& tree, const std::string& ref,
                                     const std::string& flag) {
  if (ref.empty() || ref.front() == '-') return Usage(flag + ": a ref is needed");
  auto out = Git(tree, {"rev-parse", "--verify", "--quiet", ref + "^{commit}"});
  if (!out.ok()) return Usage(absl::StrCat(flag, ": '", ref, "' is not a commit in ", tree));
  return std::string(absl::StripAsciiWhitespace(*out));
}

std::string Short(const std::string& sha) {
  return sha.substr(0, 12);
}

}  // namespace

absl::StatusOr<std::vector<v1::BisectCommit>> ResolveCommits(const std::string& tree,
                                                             const std::string& good,
                                                             const std::string& bad) {
  if (tree.empty()) return Usage("--tree: the kernel git tree is needed");
  if (auto top = Git(tree, {"rev-parse", "--git-dir"}); !top.ok()) {
    return Usage("--tree: " + tree + " is not a git repository");
  }
  auto g = CommitOf(tree, good, "--good");
  if (!g.ok()) return g.status();
  auto b = CommitOf(tree, bad, "--bad");
  if (!b.ok()) return b.status();
  if (*g == *b) return Usage("--good and --bad are the same commit (" + Short(*g) + ")");
  if (auto anc = Git(tree, {"merge-base", "--is-ancestor", *g, *b}); !anc.ok()) {
    return Usage(absl::StrCat("--good ", good, " (", Short(*g), ") is not an ancestor of --bad ",
                              bad, " (", Short(*b), ")"));
  }
  // good, then every first-parent commit up to bad: NUL-separated fields, one per line.
  auto listed = Git(tree, {"log", "--first-parent", "--reverse", "--format=%H%x00%s%x00%an <%ae>",
                           absl::StrCat(*g, "..", *b)});
  if (!listed.ok()) return listed.status();
  auto head = Git(tree, {"log", "-1", "--format=%H%x00%s%x00%an <%ae>", *g});
  if (!head.ok()) return head.status();
  std::vector<v1::BisectCommit> commits;
  for (absl::string_view line : absl::StrSplit(*head + *listed, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\0', 2));
    if (f.size() != 3) continue;
    v1::BisectCommit c;
    c.set_sha(f[0]);
    c.set_subject(f[1].substr(0, 1024));
    c.set_author(f[2].substr(0, 512));
    commits.push_back(std::move(c));
  }
  if (commits.size() < 2 || commits.back().sha() != *b) {
    return Usage(absl::StrCat("--bad ", bad, " is not on the first-parent line from ", good,
                              " (bisect along a branch's first parents)"));
  }
  if (static_cast<int>(commits.size()) - 1 > kMaxCommits) {
    return Usage(absl::StrCat(commits.size() - 1,
                              " commits from --good to --bad, over the limit "
                              "of ",
                              kMaxCommits, ": narrow the range"));
  }
  return commits;
}

absl::StatusOr<v1::BisectRequest> MakeBisectRequest(const BisectArgs& args, v1::JobSpec spec) {
  v1::BisectRequest r;
  // The study's own kernels (if it brings any) give the tree and the config.
  const v1::KernelSource* source = nullptr;
  if (!spec.kernel_sources().empty()) {
    auto it = spec.kernel_sources().find(spec.baseline());
    if (it == spec.kernel_sources().end() && spec.kernels_size() > 0) {
      it = spec.kernel_sources().find(spec.kernels(0));
    }
    if (it == spec.kernel_sources().end()) it = spec.kernel_sources().begin();
    source = &it->second;
  }
  r.set_tree(!args.tree.empty() ? args.tree : source != nullptr ? source->tree() : "");
  if (!args.config_base.empty()) {
    r.set_config_base(args.config_base);
  } else if (source != nullptr) {
    r.set_config_base(source->config_base());
  }
  if (!args.fragment_texts.empty()) {
    for (const v1::SourceFile& f : args.fragment_texts) *r.add_fragments() = f;
  } else if (!args.fragments.empty()) {
    for (const std::string& path : args.fragments) {
      std::string error;
      std::optional<std::string> text = ReadFileToString(path, &error);
      if (!text.has_value()) return Usage("--fragment: cannot read " + error);
      auto* f = r.add_fragments();
      f->set_name(path.substr(path.rfind('/') + 1));
      f->set_content(*std::move(text));
    }
  } else if (source != nullptr) {
    *r.mutable_fragments() = source->fragments();
  }
  auto commits = ResolveCommits(r.tree(), args.good, args.bad);
  if (!commits.ok()) return commits.status();
  for (auto& c : *commits) *r.add_commits() = std::move(c);
  if (args.metric == "throughput" || args.metric.empty()) {
    r.set_metric("throughput");
  } else {
    std::string name = args.metric;
    if (absl::StartsWith(name, "counter:")) name = name.substr(8);
    if (absl::StartsWith(name, "counter ")) name = name.substr(8);
    r.set_metric("counter:" + name);
  }
  for (const std::string& kv : args.cells) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--cell: KNOB=VALUE, got '" + kv + "'");
    (*r.mutable_cell())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  r.set_board(args.board);
  r.set_arch(args.arch);
  r.set_block(args.block);
  r.set_max_pairs(args.max_pairs);
  r.set_error(args.error);
  r.set_no_confirm(args.no_confirm);
  r.set_no_revert(args.no_revert);
  r.set_command(args.command);
  if (args.from_job != 0) r.set_origin("job " + std::to_string(args.from_job));
  if (args.from_change != 0) v1::SetChangePoint(&r, args.from_change);
  *r.mutable_spec() = std::move(spec);
  return r;
}

namespace {

// The tree and config of a kernel a bisection starts from (--from, --from-change): one built
// from a tree, without a series; what the arguments already say is kept.
absl::Status TakeSource(const v1::KernelSource& source, const std::string& what, BisectArgs& args) {
  if (source.tree().empty() || !source.series().empty()) {
    return Usage(absl::StrCat(what,
                              " must be built from a tree without a series (bisect a series by "
                              "giving its patches as commits of a branch)"));
  }
  if (!source.fragments().empty() && args.fragments.empty() && args.fragment_texts.empty()) {
    return Usage(absl::StrCat(what,
                              ": the job stored its config fragments by name only; pass them "
                              "with --fragment"));
  }
  if (args.tree.empty()) args.tree = source.tree();
  if (args.config_base.empty()) args.config_base = source.config_base();
  return absl::OkStatus();
}

}  // namespace

absl::Status FromJob(const v1::Job& job, BisectArgs& args, v1::JobSpec& spec) {
  spec = job.spec();
  const std::string what = absl::StrCat("--from ", job.id());
  // Two kernels of one tree at two refs: the baseline is good, the other bad.
  const std::string base =
      spec.baseline().empty() && spec.kernels_size() > 0 ? spec.kernels(0) : spec.baseline();
  const v1::KernelSource *a = nullptr, *b = nullptr;
  for (const auto& [label, source] : spec.kernel_sources()) {
    if (label == base) {
      a = &source;
    } else if (b == nullptr) {
      b = &source;
    }
  }
  if (a == nullptr || b == nullptr || a->tree().empty() || b->tree() != a->tree() ||
      !b->series().empty()) {
    return Usage(what +
                 ": the job must compare two refs of one tree without series (bisect a series "
                 "by giving its patches as commits of a branch)");
  }
  if (absl::Status s = TakeSource(*a, what, args); !s.ok()) return s;
  if (args.good.empty()) args.good = a->ref();
  if (args.bad.empty()) args.bad = b->ref();
  spec.clear_kernel_sources();
  return absl::OkStatus();
}

absl::Status FromChange(const v1::ChangePoint& cp, const v1::Job& before,
                        const std::vector<v1::Build>& before_builds, const v1::Job& after,
                        const std::vector<v1::Build>& after_builds, BisectArgs& args,
                        v1::JobSpec& spec) {
  const std::string what = absl::StrCat("--from-change ", cp.id());
  if (cp.previous_job_id() == 0) {
    return Usage(what +
                 ": the change point does not name the job before it (found by an older "
                 "controller); bisect with --tree, --good and --bad");
  }
  struct Side {
    const char* role;
    const v1::Job* job;
    const std::vector<v1::Build>* builds;
    std::string commit;
  };
  Side sides[] = {{"good", &before, &before_builds, ""}, {"bad", &after, &after_builds, ""}};
  for (Side& side : sides) {
    const v1::JobSpec& s = side.job->spec();
    // The kernel's label in the job: its series name, or that name with the slot of a
    // schedule that follows a branch ("LABEL@<hash>+<slot>").
    std::string label;
    for (const auto& k : s.kernels()) {
      if (k == cp.kernel() || absl::StartsWith(k, cp.kernel() + "+")) label = k;
    }
    auto it = s.kernel_sources().find(label);
    if (label.empty() || it == s.kernel_sources().end()) {
      return Usage(absl::StrCat(what, ": job ", side.job->id(), " does not build kernel ",
                                cp.kernel(),
                                " from a tree (a label installed on the board?); bisect with "
                                "--tree, --good and --bad"));
    }
    if (absl::Status st =
            TakeSource(it->second, absl::StrCat(what, ": kernel ", cp.kernel()), args);
        !st.ok()) {
      return st;
    }
    if (it->second.tree() != args.tree) {
      return Usage(absl::StrCat(what, ": jobs ", before.id(), " and ", after.id(),
                                " built the kernel from different trees"));
    }
    for (const v1::Build& b : *side.builds) {
      if (b.label() == label && b.arch() == cp.arch() &&
          v1::BuildStateOf(b) == v1::BUILD_STATE_DONE) {
        side.commit = b.base_commit();
      }
    }
    if (side.commit.empty()) {
      return Usage(absl::StrCat(what, ": job ", side.job->id(), " has no finished build of ", label,
                                " for ", cp.arch()));
    }
  }
  if (sides[0].commit == sides[1].commit) {
    return Usage(absl::StrCat(what, ": jobs ", before.id(), " and ", after.id(),
                              " ran the same commit ", Short(sides[0].commit),
                              ": the kernel did not change there, so the change is not the "
                              "kernel's (look at the board, or mark the change point invalid)"));
  }
  args.good = sides[0].commit;
  args.bad = sides[1].commit;
  if (args.board.empty() && args.arch.empty()) args.board = cp.board();
  if (args.cells.empty() && cp.config() != "default") {
    args.cells = absl::StrSplit(cp.config(), ',', absl::SkipEmpty());
  }
  spec = after.spec();
  spec.clear_kernel_sources();
  return absl::OkStatus();
}

}  // namespace faultline::bisect
