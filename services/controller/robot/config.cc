// robot.yaml (faultline.v1.RobotConfig) read into the robot's options (robot/options.h).
#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "common/units.h"
#include "faultline/v1/robot.pb.h"
#include "robot/mail.h"
#include "services/controller/robot/options.h"
#include "spec/spec_file.h"

namespace faultline::controller {

absl::StatusOr<RobotOptions> LoadRobotConfig(const std::string& path) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", why));
  };
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  v1::RobotConfig config;
  if (absl::Status s = spec::LoadMessageFromYaml(*text, path, &config); !s.ok()) return s;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](const std::string& file) {
    const std::filesystem::path p(file);
    return (p.is_absolute() || dir.empty() ? p : dir / p).string();
  };
  RobotOptions o;
  if (config.archive().empty()) return bad("archive", "the list's public-inbox directory");
  o.archive = resolve(config.archive());
  if (config.tree().empty() || config.tree().front() != '/') {
    return bad("tree", "an absolute path of the kernel git tree on the builders");
  }
  o.tree = config.tree();
  o.branch = config.branch();
  if (!config.paths().empty()) o.rules.paths.assign(config.paths().begin(), config.paths().end());
  if (!config.opt_in_tag().empty()) o.rules.opt_in_tag = config.opt_in_tag();
  if (config.studies().empty()) return bad("studies", "at least one job spec file");
  for (int i = 0; i < config.studies_size(); ++i) {
    absl::StatusOr<v1::JobSpec> study = spec::LoadJobSpecFile(resolve(config.studies(i)));
    if (!study.ok()) return study.status();
    if (!study->kernels().empty() || !study->kernel_sources().empty()) {
      return bad(absl::StrCat("studies[", i, "]"),
                 "names kernels; the robot sets them (base and the series)");
    }
    o.studies.push_back(*std::move(study));
  }
  o.arches.assign(config.arches().begin(), config.arches().end());
  o.include.assign(config.include().begin(), config.include().end());
  if (!config.config_base().empty()) o.config_base = config.config_base();
  for (int i = 0; i < config.fragments_size(); ++i) {
    absl::StatusOr<std::string> fragment = ReadFile(resolve(config.fragments(i)));
    if (!fragment.ok())
      return bad(absl::StrCat("fragments[", i, "]"), fragment.status().ToString());
    v1::SourceFile f;
    f.set_name(std::filesystem::path(config.fragments(i)).filename().string());
    f.set_content(*fragment);
    o.fragments.push_back(std::move(f));
  }
  o.bisect_changes = config.bisect_changes();
  if (o.bisect_changes && !std::filesystem::is_directory(o.tree)) {
    return bad("bisect_changes", absl::StrCat("the controller lists the commits from tree ", o.tree,
                                              ": not found where it runs"));
  }
  if (config.poll_seconds() > 0) o.poll_seconds = config.poll_seconds();
  const v1::RobotLimits& l = config.limits();
  auto size = [&](const std::string& field, const std::string& text, size_t* out) {
    if (text.empty()) return absl::OkStatus();
    std::string error;
    std::optional<uint64_t> bytes = ParseSize(text, &error);
    if (!bytes || *bytes == 0) {
      return bad("limits." + field,
                 absl::StrCat("\"", text, "\" is not a size above 0 (", error, "; e.g. 8M)"));
    }
    *out = *bytes;
    return absl::OkStatus();
  };
  if (absl::Status s = size("pass_bytes", l.pass_bytes(), &o.max_pass_bytes); !s.ok()) return s;
  if (absl::Status s = size("mail_bytes", l.mail_bytes(), &o.max_mail_bytes); !s.ok()) return s;
  if (absl::Status s = size("series_bytes", l.series_bytes(), &o.max_series_bytes); !s.ok())
    return s;
  if (l.mails_per_pass() > 0) o.mails_per_pass = l.mails_per_pass();
  if (l.patches() > 0) o.max_patches = static_cast<int>(std::min<uint32_t>(l.patches(), 99999));
  if (l.pass_seconds() > 0) o.pass_seconds = std::min<uint32_t>(l.pass_seconds(), 86400);
  if (l.series_per_pass() > 0) {
    o.series_per_pass = static_cast<int>(std::min<uint32_t>(l.series_per_pass(), 10000));
  }
  const v1::RobotReplies& r = config.replies();
  o.replies.from = r.from();
  o.replies.smtp = r.smtp();
  o.replies.dry_run_dir = r.dry_run_dir().empty() ? "" : resolve(r.dry_run_dir());
  if (r.per_hour() > 0) o.replies.per_hour = r.per_hour();
  o.replies.cc.assign(r.cc().begin(), r.cc().end());
  o.replies.patchwork = r.patchwork();
  o.replies.culprits = r.culprits();
  if (!r.patchwork().empty()) {
    if (r.patchwork_token_file().empty()) {
      return bad("replies.patchwork_token_file", "a file with the API token that posts checks");
    }
    absl::StatusOr<std::string> token = ReadFile(resolve(r.patchwork_token_file()));
    if (!token.ok()) return bad("replies.patchwork_token_file", token.status().ToString());
    o.replies.patchwork_token = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (!o.replies.from.empty() && robot::AddressOf(o.replies.from).find('@') == std::string::npos) {
    return bad("replies.from", "a mailbox (\"faultline robot <robot@example.org>\")");
  }
  if (!o.replies.from.empty() && o.replies.smtp.empty() && o.replies.dry_run_dir.empty()) {
    return bad("replies", "smtp (host:port) or dry_run_dir, to send or write the mails");
  }
  return o;
}

}  // namespace faultline::controller
