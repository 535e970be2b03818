#pragma once
// The agent's board configuration (agent.yaml):
//   board: lab-x86-01
//   labels: {site: lab1}
//   work_dir: /var/tmp/faultline       # files of filemap-thrash live here
//   workload_binary: ""                # default: faultline-workload next to the agent
//   cgroup_parent: ""                  # optional delegated cgroup v2 directory
//   zram_swap: 1G                      # optional: a zram swap device of this size is set
//                                      # up for each run that needs swap, removed after
//   state_dir: /var/lib/faultline-agent  # what must survive a reboot (switches, result spool)
//   token_file: /etc/faultline/agent.token  # this board's agent token
//   tls_ca: /etc/faultline/ca.pem        # TLS to the controller (+ tls_cert/tls_key: mTLS)
//   tls_server_name: controller.lab      # optional: the name the controllers' certificates
//                                        # carry (default: the host of --controller, or of
//                                        # its first address when it is a list)
//   switch_timeout: 10m                  # a switch not back by then: needs-check
//   kernels:
//     - {label: vanilla, release: 6.1.0-18-amd64, boot: grub-reboot,
//        grub_entry: "Advanced options>Debian, with Linux 6.1.0-18-amd64"}
//     - {label: patched, release: 6.1.0-rc1+, boot: kexec,
//        kernel: /boot/vmlinuz-6.1.0-rc1+, initrd: /boot/initrd.img-6.1.0-rc1+,
//        cmdline: running}                # running: this boot's /proc/cmdline
//     - {label: lab, release: 6.2.0, boot: command, command: [/usr/local/bin/boot, lab]}
// `release: running` stands for the running kernel's `uname -r`. `boot: none` serves only
// while that kernel happens to run. The controller names kernels by label only: what a
// switch executes comes from this file alone.
// For simulated boards (tests): release_file and boot_id_file replace `uname -r` and
// /proc/sys/kernel/random/boot_id as the agent's idea of what is running.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::agent {

struct KernelEntry {
  std::string label;
  std::string release;
  std::string boot = "none";  // none | kexec | grub-reboot | command
  // kexec:
  std::string kernel;               // the image (absolute path)
  std::string initrd;               // optional
  std::string cmdline = "running";  // "running": reuse /proc/cmdline
  // How the loaded image is entered: "systemctl" (`systemctl kexec`: services stop
  // cleanly), "direct" (`sync`, then `kexec -e`: boards without systemd, e.g. a ramdisk
  // guest), or "auto" (systemctl when systemd is the init, else direct).
  std::string kexec_exec = "auto";
  // Extra arguments for `kexec --load`, e.g. [-i] (skip the purgatory's checksum: halves
  // an arm64 switch under emulation) or [-s] (kexec_file_load, for lockdown kernels).
  std::vector<std::string> kexec_args;
  // grub-reboot: the menu entry (title, id or index) booted once, then the default again.
  std::string grub_entry;
  // command: argv of the lab's boot script; it gets FAULTLINE_BOARD, FAULTLINE_KERNEL_LABEL,
  // FAULTLINE_KERNEL_RELEASE and FAULTLINE_AGENT_PID in its environment.
  std::vector<std::string> command;
};

// Kernels that jobs bring (agent.yaml built_kernels): fetched from the controller into a
// bounded cache under `dir` and booted with kexec by this template (its kernel and release
// come with each order).
struct BuiltKernelsConfig {
  bool enabled = false;
  std::string dir = "/var/lib/faultline-agent/kernels";
  uint64_t max_bytes = 2ull << 30;
  KernelEntry boot;  // boot: kexec; initrd, cmdline, kexec_exec, kexec_args
  // CA certificates for images fetched by https URL (an object store with a private CA);
  // empty: the system's.
  std::string url_ca;
};

// A builder (agent.yaml builder): builds kernels for these arches with kbuild.
struct BuilderConfig {
  std::vector<std::string> arches;  // empty: not a builder
  std::string cache = "/var/cache/faultline-kbuild";
  int jobs = 0;  // make -j; 0: the CPUs
  // The sandbox of the tree's programs (kbuild/sandbox.h, docs/kernels.md): auto, required
  // or none-i-trust-every-series; its uid; its limits (sandbox_limits: memory, pids, cpus,
  // wall, step_wall, log, file, disk_reserve, image).
  std::string sandbox = "auto";
  uint32_t sandbox_uid = 61183;
  std::vector<std::string> sandbox_pass_env;  // variables passed in by name
  std::vector<std::string> sandbox_readonly;  // more paths it sees, read-only
  struct Limits {
    uint64_t memory = 12ull << 30, pids = 2048, log = 64ull << 20, file = 4ull << 30,
             disk_reserve = 1ull << 30, image = 256ull << 20;
    double cpus = 0;
    int64_t wall_seconds = 3 * 3600;
    int64_t step_wall_seconds = 600;  // each config program, and kernelrelease
  } limits;
};

struct AgentConfig {
  std::string board;
  std::map<std::string, std::string> labels;
  std::string work_dir = "/var/tmp/faultline";
  std::string workload_binary;
  std::string cgroup_parent;
  uint64_t zram_swap_bytes = 0;  // 0: the agent never provisions swap
  std::vector<KernelEntry> kernels;
  std::string state_dir = "/var/lib/faultline-agent";
  uint32_t switch_timeout_seconds = 600;
  // Talking to the controller: this board's agent token, and TLS (CA to trust; a client
  // certificate and key for mutual TLS).
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;  // "": TlsServerName's default
  std::string release_file;     // tests: read the running release from here
  std::string boot_id_file;     // tests: read the boot id from here
  // Where the kernel keeps the last boots' console and log across a reboot (ramoops, EFI):
  // a failed switch's tail goes to the controller with the needs-check.
  std::string pstore_dir = "/sys/fs/pstore";
  BuiltKernelsConfig built_kernels;
  BuilderConfig builder;
};

// The kexec entry that boots a fetched image (`path`, `release`) by the built_kernels
// template, under `label`.
KernelEntry BuiltKernelEntry(const AgentConfig& config, const std::string& label,
                             const std::string& release, const std::string& path);

// The configured entry for a label, or nullptr.
const KernelEntry* FindKernel(const AgentConfig& config, const std::string& label);

// Parses and checks the config; `running_release` resolves `release: running`.
absl::StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text,
                                             const std::string& running_release);
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path,
                                            const std::string& running_release);

// The label of the configured kernel whose release is running, or "" when none is.
std::string RunningKernelLabel(const AgentConfig& config, const std::string& running_release);
// Every label whose release is running (two labels on one kernel make an A/A check).
std::vector<std::string> RunningKernelLabels(const AgentConfig& config,
                                             const std::string& running_release);

}  // namespace faultline::agent
