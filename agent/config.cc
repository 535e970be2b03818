#include "agent/config.h"

#include <optional>
#include <set>

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "common/units.h"
#include "yaml-cpp/yaml.h"

namespace faultline::agent {
namespace {

std::string Where(const YAML::Node& node) {
  return absl::StrCat("line ", node.Mark().line + 1, ", column ", node.Mark().column + 1);
}

absl::Status Bad(const YAML::Node& node, const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(field, " (", Where(node), "): ", message));
}

bool ValidLabel(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

// built_kernels: where kernels built from source are kept and how they boot.
absl::Status ParseBuiltKernels(const YAML::Node& built, BuiltKernelsConfig* b) {
  if (!built.IsMap()) return Bad(built, "built_kernels", "must be a mapping");
  b->enabled = true;
  b->boot.boot = "kexec";
  for (const auto& kv : built) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "built_kernels." + key;
    if (key == "dir") {
      b->dir = kv.second.as<std::string>();
      if (b->dir.empty() || b->dir.front() != '/')
        return Bad(kv.second, field, "must be an absolute path");
    } else if (key == "max_size") {
      auto bytes = ParseSize(kv.second.as<std::string>());
      if (!bytes || *bytes < (64ull << 20)) {
        return Bad(kv.second, field, "must be a size of at least 64M, e.g. 2G");
      }
      b->max_bytes = *bytes;
    } else if (key == "initrd") {
      b->boot.initrd = kv.second.as<std::string>();
      if (b->boot.initrd.front() != '/') return Bad(kv.second, field, "must be an absolute path");
    } else if (key == "url_ca") {
      b->url_ca = kv.second.as<std::string>();
      if (b->url_ca.empty() || b->url_ca.front() != '/')
        return Bad(kv.second, field, "must be an absolute path");
      if (access(b->url_ca.c_str(), R_OK) != 0)
        return Bad(kv.second, field, "is not a readable file");
    } else if (key == "cmdline") {
      b->boot.cmdline = kv.second.as<std::string>();
    } else if (key == "boot") {
      b->boot.boot = kv.second.as<std::string>();
      if (b->boot.boot != "kexec" && b->boot.boot != "command") {
        return Bad(kv.second, field, "must be kexec or command");
      }
    } else if (key == "command") {
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        return Bad(kv.second, field, "must be a non-empty list: the program and its arguments");
      }
      for (const auto& arg : kv.second) b->boot.command.push_back(arg.as<std::string>());
    } else if (key == "kexec_exec") {
      b->boot.kexec_exec = kv.second.as<std::string>();
      if (b->boot.kexec_exec != "auto" && b->boot.kexec_exec != "systemctl" &&
          b->boot.kexec_exec != "direct") {
        return Bad(kv.second, field, "must be one of auto, systemctl, direct");
      }
    } else if (key == "kexec_args") {
      if (!kv.second.IsSequence()) return Bad(kv.second, field, "must be a list, e.g. [-i]");
      for (const auto& arg : kv.second) b->boot.kexec_args.push_back(arg.as<std::string>());
    } else {
      return Bad(kv.first, field,
                 "unknown field (dir, max_size, boot, command, initrd, cmdline, kexec_exec, "
                 "kexec_args, url_ca)");
    }
  }
  if (b->boot.boot == "command" && b->boot.command.empty()) {
    return Bad(built, "built_kernels.command", "boot: command needs the command to run");
  }
  return absl::OkStatus();
}

// builder: the arches this board builds kernels for, its cache and jobs.
// builder.sandbox_limits: sizes with units (12G, 64M), a count, CPUs, a duration (3h).
absl::Status ParseSandboxLimits(const YAML::Node& node, BuilderConfig::Limits& limits) {
  if (!node.IsMap()) return Bad(node, "builder.sandbox_limits", "must be a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "builder.sandbox_limits." + key;
    const std::string text = kv.second.as<std::string>();
    std::string error;
    uint64_t* size = key == "memory"         ? &limits.memory
                     : key == "log"          ? &limits.log
                     : key == "file"         ? &limits.file
                     : key == "disk_reserve" ? &limits.disk_reserve
                     : key == "image"        ? &limits.image
                                             : nullptr;
    if (size != nullptr) {
      std::optional<uint64_t> v = ParseSize(text, &error);
      if (!v || *v < (1u << 20)) return Bad(kv.second, field, "must be a size of at least 1M");
      *size = *v;
    } else if (key == "pids") {
      std::optional<uint64_t> v = ParseUnsigned(text);
      if (!v || *v < 16 || *v > 1'000'000) return Bad(kv.second, field, "must be 16 .. 1000000");
      limits.pids = *v;
    } else if (key == "cpus") {
      limits.cpus = kv.second.as<double>();
      if (!(limits.cpus >= 0) || limits.cpus > 4096) {
        return Bad(kv.second, field, "must be 0 (no quota) .. 4096");
      }
    } else if (key == "wall" || key == "step_wall") {
      std::optional<std::chrono::milliseconds> d = ParseDuration(text, &error);
      if (!d || *d < std::chrono::seconds(10) || *d > std::chrono::hours(48)) {
        return Bad(kv.second, field, "must be a duration of 10s .. 48h");
      }
      (key == "wall" ? limits.wall_seconds : limits.step_wall_seconds) =
          std::chrono::duration_cast<std::chrono::seconds>(*d).count();
    } else {
      return Bad(kv.first, field,
                 "unknown field (memory, pids, cpus, wall, step_wall, log, file, disk_reserve, "
                 "image)");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseBuilder(const YAML::Node& node, BuilderConfig* builder) {
  if (!node.IsMap()) return Bad(node, "builder", "must be a mapping");
  static const std::set<std::string> kArches = {"x86_64", "aarch64", "riscv64"};
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "builder." + key;
    if (key == "arches") {
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        return Bad(kv.second, field, "must be a non-empty list, e.g. [x86_64]");
      }
      for (const auto& a : kv.second) {
        const std::string arch = a.as<std::string>();
        if (!kArches.count(arch)) {
          return Bad(a, field, "'" + arch + "' is not one of x86_64, aarch64, riscv64");
        }
        builder->arches.push_back(arch);
      }
    } else if (key == "cache") {
      builder->cache = kv.second.as<std::string>();
      if (builder->cache.empty() || builder->cache.front() != '/') {
        return Bad(kv.second, field, "must be an absolute path");
      }
    } else if (key == "jobs") {
      builder->jobs = kv.second.as<int>();
      if (builder->jobs < 0 || builder->jobs > 1024) {
        return Bad(kv.second, field, "must be 0 (the CPUs) .. 1024");
      }
    } else if (key == "sandbox") {
      builder->sandbox = kv.second.as<std::string>();
      if (builder->sandbox != "auto" && builder->sandbox != "required" &&
          builder->sandbox != "none-i-trust-every-series") {
        return Bad(kv.second, field,
                   "must be auto, required or none-i-trust-every-series (the opt-out, by name)");
      }
    } else if (key == "sandbox_uid") {
      const int64_t uid = kv.second.as<int64_t>();
      if (uid < 1000 || uid > 4'000'000'000) {
        return Bad(kv.second, field, "must be an unprivileged uid, 1000 .. 4000000000");
      }
      builder->sandbox_uid = static_cast<uint32_t>(uid);
    } else if (key == "sandbox_pass_env" || key == "sandbox_readonly") {
      if (!kv.second.IsSequence()) return Bad(kv.second, field, "must be a list");
      for (const auto& item : kv.second) {
        const std::string v = item.as<std::string>();
        if (key == "sandbox_readonly" && (v.empty() || v.front() != '/')) {
          return Bad(item, field, "'" + v + "' is not an absolute path");
        }
        (key == "sandbox_pass_env" ? builder->sandbox_pass_env : builder->sandbox_readonly)
            .push_back(v);
      }
    } else if (key == "sandbox_limits") {
      if (absl::Status s = ParseSandboxLimits(kv.second, builder->limits); !s.ok()) return s;
    } else {
      return Bad(kv.first, field,
                 "unknown field (arches, cache, jobs, sandbox, sandbox_uid, sandbox_limits, "
                 "sandbox_pass_env, sandbox_readonly)");
    }
  }
  if (builder->arches.empty()) return Bad(node, "builder.arches", "is required");
  return absl::OkStatus();
}

// kernels[i]: one kernel the board boots, checked for what its boot method needs.
absl::Status ParseKernelEntry(const YAML::Node& k, size_t i, const std::string& running_release,
                              std::set<std::string>* labels, KernelEntry* entry) {
  KernelEntry& e = *entry;
  std::string field = absl::StrCat("kernels[", i, "]");
  if (!k.IsMap()) return Bad(k, field, "must be a mapping with label, release, boot");
  for (const auto& kv : k) {
    std::string key = kv.first.as<std::string>();
    if (key == "label")
      e.label = kv.second.as<std::string>();
    else if (key == "release")
      e.release = kv.second.as<std::string>();
    else if (key == "boot")
      e.boot = kv.second.as<std::string>();
    else if (key == "kernel")
      e.kernel = kv.second.as<std::string>();
    else if (key == "initrd")
      e.initrd = kv.second.as<std::string>();
    else if (key == "cmdline")
      e.cmdline = kv.second.as<std::string>();
    else if (key == "grub_entry")
      e.grub_entry = kv.second.as<std::string>();
    else if (key == "kexec_exec")
      e.kexec_exec = kv.second.as<std::string>();
    else if (key == "kexec_args") {
      if (!kv.second.IsSequence()) {
        return Bad(kv.second, field + ".kexec_args", "must be a list, e.g. [-i]");
      }
      for (const auto& arg : kv.second) {
        const std::string a = arg.as<std::string>();
        if (a.empty() || a.front() != '-') {
          return Bad(arg, field + ".kexec_args",
                     "each must be an option starting with '-', got '" + a + "'");
        }
        e.kexec_args.push_back(a);
      }
    } else if (key == "command") {
      if (!kv.second.IsSequence() || kv.second.size() == 0) {
        return Bad(kv.second, field + ".command",
                   "must be a non-empty list: the program and its arguments");
      }
      for (const auto& arg : kv.second) e.command.push_back(arg.as<std::string>());
    } else {
      return Bad(kv.first, field + "." + key,
                 "unknown field (label, release, boot, kernel, initrd, cmdline, kexec_exec, "
                 "kexec_args, grub_entry, command)");
    }
  }
  if (!ValidLabel(e.label)) {
    return Bad(k, field + ".label", "is required: 1..64 of letters, digits, '-', '_', '.'");
  }
  if (!labels->insert(e.label).second) return Bad(k, field + ".label", "is listed twice");
  if (e.release.empty()) return Bad(k, field + ".release", "is required (or 'running')");
  if (e.release == "running") e.release = running_release;
  static const std::set<std::string> kBoot = {"none", "kexec", "grub-reboot", "command"};
  if (!kBoot.count(e.boot)) {
    return Bad(k, field + ".boot", "must be one of none, kexec, grub-reboot, command");
  }
  if (e.boot == "kexec" && (e.kernel.empty() || e.kernel.front() != '/')) {
    return Bad(k, field + ".kernel", "boot: kexec needs the kernel image's absolute path");
  }
  if (e.boot == "kexec" && !e.initrd.empty() && e.initrd.front() != '/') {
    return Bad(k, field + ".initrd", "must be an absolute path");
  }
  if (e.kexec_exec != "auto" && e.kexec_exec != "systemctl" && e.kexec_exec != "direct") {
    return Bad(k, field + ".kexec_exec", "must be one of auto, systemctl, direct");
  }
  if (e.boot == "grub-reboot" && e.grub_entry.empty()) {
    return Bad(k, field + ".grub_entry", "boot: grub-reboot needs the menu entry to boot");
  }
  if (e.boot == "command" && e.command.empty()) {
    return Bad(k, field + ".command", "boot: command needs the command to run");
  }
  if (e.boot == "command" && e.command.front().front() != '/') {
    return Bad(k, field + ".command", "the program must be an absolute path");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text,
                                             const std::string& running_release) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("the config must be a YAML mapping");
  static const std::set<std::string> kKnown = {
      "board",           "labels",        "work_dir",  "workload_binary", "cgroup_parent",
      "zram_swap",       "kernels",       "state_dir", "switch_timeout",  "release_file",
      "boot_id_file",    "token_file",    "tls_ca",    "tls_cert",        "tls_key",
      "tls_server_name", "built_kernels", "builder",   "pstore_dir"};
  AgentConfig config;
  try {
    for (const auto& kv : root) {
      std::string key = kv.first.as<std::string>();
      if (!kKnown.count(key)) {
        return Bad(kv.first, key,
                   "unknown field (fields: board, labels, work_dir, workload_binary, "
                   "cgroup_parent, zram_swap, kernels, state_dir, switch_timeout, release_file, "
                   "boot_id_file, token_file, tls_ca, tls_cert, tls_key, tls_server_name, "
                   "built_kernels, builder, pstore_dir)");
      }
    }
    if (!root["board"] || !ValidLabel(root["board"].as<std::string>())) {
      return Bad(root["board"] ? root["board"] : root, "board",
                 "is required: 1..64 characters of letters, digits, '-', '_', '.'");
    }
    config.board = root["board"].as<std::string>();
    if (root["labels"]) {
      if (!root["labels"].IsMap()) return Bad(root["labels"], "labels", "must be a mapping");
      for (const auto& kv : root["labels"]) {
        config.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
      }
    }
    if (root["work_dir"]) config.work_dir = root["work_dir"].as<std::string>();
    if (root["workload_binary"]) config.workload_binary = root["workload_binary"].as<std::string>();
    if (root["cgroup_parent"]) config.cgroup_parent = root["cgroup_parent"].as<std::string>();
    if (root["zram_swap"]) {
      const std::string text = root["zram_swap"].as<std::string>();
      auto bytes = ParseSize(text);
      if (!bytes) {
        return Bad(root["zram_swap"], "zram_swap",
                   "must be a size like 512M or 1G (0 = off), got " + text);
      }
      if (*bytes != 0 && *bytes < (16ull << 20)) {
        return Bad(root["zram_swap"], "zram_swap", "must be 0 (off) or at least 16M, got " + text);
      }
      config.zram_swap_bytes = *bytes;
    }
    if (config.work_dir.empty() || config.work_dir.front() != '/') {
      return Bad(root["work_dir"], "work_dir", "must be an absolute path");
    }
    for (auto [key, target] : {std::pair<const char*, std::string*>{"state_dir", &config.state_dir},
                               {"release_file", &config.release_file},
                               {"boot_id_file", &config.boot_id_file},
                               {"pstore_dir", &config.pstore_dir},
                               {"token_file", &config.token_file},
                               {"tls_ca", &config.tls_ca},
                               {"tls_cert", &config.tls_cert},
                               {"tls_key", &config.tls_key}}) {
      if (!root[key]) continue;
      *target = root[key].as<std::string>();
      if (target->empty() || target->front() != '/') {
        return Bad(root[key], key, "must be an absolute path");
      }
    }
    if (root["tls_server_name"]) {
      config.tls_server_name = root["tls_server_name"].as<std::string>();
      if (config.tls_server_name.empty() || config.tls_server_name.size() > 253) {
        return Bad(root["tls_server_name"], "tls_server_name",
                   "must be a name of 1..253 characters");
      }
    }
    if (config.tls_cert.empty() != config.tls_key.empty()) {
      return Bad(root, config.tls_cert.empty() ? "tls_cert" : "tls_key",
                 "tls_cert and tls_key go together (mutual TLS)");
    }
    if (!config.tls_cert.empty() && config.tls_ca.empty()) {
      return Bad(root["tls_cert"], "tls_ca", "a client certificate needs tls_ca (TLS) as well");
    }
    if (root["switch_timeout"]) {
      const std::string text = root["switch_timeout"].as<std::string>();
      auto d = ParseDuration(text);
      const int64_t seconds = d ? std::chrono::duration_cast<std::chrono::seconds>(*d).count() : 0;
      if (!d || seconds < 10 || seconds > 4 * 3600) {
        return Bad(root["switch_timeout"], "switch_timeout",
                   "must be a duration between 10s and 4h, got " + text);
      }
      config.switch_timeout_seconds = static_cast<uint32_t>(seconds);
    }
    if (const YAML::Node built = root["built_kernels"]) {
      if (absl::Status st = ParseBuiltKernels(built, &config.built_kernels); !st.ok()) return st;
    }
    if (const YAML::Node builder = root["builder"]) {
      if (absl::Status st = ParseBuilder(builder, &config.builder); !st.ok()) return st;
    }
    const YAML::Node kernels = root["kernels"];
    if (!kernels || !kernels.IsSequence() || kernels.size() == 0) {
      return Bad(kernels ? kernels : root, "kernels",
                 "at least one kernel is required, e.g. [{label: vanilla, release: running}]");
    }
    std::set<std::string> labels;
    for (size_t i = 0; i < kernels.size(); ++i) {
      KernelEntry e;
      if (absl::Status st = ParseKernelEntry(kernels[i], i, running_release, &labels, &e);
          !st.ok()) {
        return st;
      }
      config.kernels.push_back(std::move(e));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  return config;
}

absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path,
                                            const std::string& running_release) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto config = ParseAgentConfig(*text, running_release);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

const KernelEntry* FindKernel(const AgentConfig& config, const std::string& label) {
  for (const auto& k : config.kernels) {
    if (k.label == label) return &k;
  }
  return nullptr;
}

std::string RunningKernelLabel(const AgentConfig& config, const std::string& running_release) {
  for (const auto& k : config.kernels) {
    if (k.release == running_release) return k.label;
  }
  return "";
}

std::vector<std::string> RunningKernelLabels(const AgentConfig& config,
                                             const std::string& running_release) {
  std::vector<std::string> labels;
  for (const auto& k : config.kernels) {
    if (k.release == running_release) labels.push_back(k.label);
  }
  return labels;
}

KernelEntry BuiltKernelEntry(const AgentConfig& config, const std::string& label,
                             const std::string& release, const std::string& path) {
  KernelEntry e = config.built_kernels.boot;
  e.label = label;
  e.release = release;
  e.kernel = path;  // kexec loads it; a `command` gets it as FAULTLINE_KERNEL_IMAGE
  return e;
}

}  // namespace faultline::agent
