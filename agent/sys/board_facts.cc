#include "agent/sys/board_facts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include "agent/sys/cgroup.h"
#include "agent/sys/file_io.h"
#include "common/strings.h"
#include "common/units.h"

namespace faultline::sys {
namespace {

// First "key : value" line whose key is `key` (cpuinfo pads keys with tabs).
std::string_view FindCpuinfoValue(std::string_view cpuinfo, std::string_view key) {
  while (!cpuinfo.empty()) {
    size_t eol = cpuinfo.find('\n');
    std::string_view line = cpuinfo.substr(0, eol);
    cpuinfo = eol == std::string_view::npos ? std::string_view() : cpuinfo.substr(eol + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (TrimSpace(line.substr(0, colon)) == key) {
      std::string_view value = TrimSpace(line.substr(colon + 1));
      if (!value.empty()) return value;
    }
  }
  return {};
}

// The few Arm implementer codes labs actually have; others print as hex.
std::string ArmImplementerName(std::string_view code) {
  if (code == "0x41") return "ARM";
  if (code == "0x42") return "Broadcom";
  if (code == "0x43") return "Cavium";
  if (code == "0x46") return "Fujitsu";
  if (code == "0x48") return "HiSilicon";
  if (code == "0x4e") return "NVIDIA";
  if (code == "0x51") return "Qualcomm";
  if (code == "0x61") return "Apple";
  if (code == "0xc0") return "Ampere";
  return "implementer " + std::string(code);
}

}  // namespace

std::string ParseCpuModel(std::string_view cpuinfo, std::string_view arch) {
  if (auto v = FindCpuinfoValue(cpuinfo, "model name"); !v.empty()) return std::string(v);
  auto part = FindCpuinfoValue(cpuinfo, "CPU part");
  if (!part.empty()) {
    auto implementer = FindCpuinfoValue(cpuinfo, "CPU implementer");
    std::string model = implementer.empty() ? std::string() : ArmImplementerName(implementer) + " ";
    return model + "part " + std::string(part);
  }
  if (auto v = FindCpuinfoValue(cpuinfo, "uarch"); !v.empty()) return std::string(v);
  if (auto v = FindCpuinfoValue(cpuinfo, "isa"); !v.empty()) return std::string(v);
  if (auto v = FindCpuinfoValue(cpuinfo, "Hardware"); !v.empty()) return std::string(v);
  return std::string(arch);
}

uint64_t ParseMemTotalBytes(std::string_view meminfo) {
  while (!meminfo.empty()) {
    size_t eol = meminfo.find('\n');
    std::string_view line = meminfo.substr(0, eol);
    meminfo = eol == std::string_view::npos ? std::string_view() : meminfo.substr(eol + 1);
    if (line.substr(0, 9) != "MemTotal:") continue;
    std::string_view value = TrimSpace(line.substr(9));
    size_t space = value.find(' ');
    auto kib = ParseUnsigned(value.substr(0, space));  // "kB" follows; it means KiB
    return kib ? *kib * 1024 : 0;
  }
  return 0;
}

BoardFacts CollectBoardFacts(const BoardFactsSources& sources) {
  BoardFacts facts;
  struct utsname uts;
  if (::uname(&uts) == 0) {
    facts.arch = uts.machine;
    facts.kernel_release = uts.release;
  }
  if (auto cpuinfo = ReadFileToString(sources.proc_root + "/cpuinfo", nullptr)) {
    facts.cpu_model = ParseCpuModel(*cpuinfo, facts.arch);
  } else {
    facts.cpu_model = facts.arch;
  }
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  facts.cpu_count = online > 0 ? static_cast<uint32_t>(online) : 0;
  if (auto meminfo = ReadFileToString(sources.proc_root + "/meminfo", nullptr)) {
    facts.memory_bytes = ParseMemTotalBytes(*meminfo);
  }
  long page_size = ::sysconf(_SC_PAGESIZE);
  facts.page_size = page_size > 0 ? static_cast<uint64_t>(page_size) : 0;
  if (auto swaps = ReadSwapDevices(nullptr, sources.proc_root + "/swaps")) {
    facts.swap_devices = std::move(*swaps);
  }
  std::string ignored;
  CgroupBackendOptions cgroup_options;
  cgroup_options.cgroup_root = sources.cgroup_root;
  if (auto backend = DetectCgroupBackend(cgroup_options, &ignored)) {
    facts.cgroup_version = std::string(CgroupVersionName(backend->version));
  }
  if (auto version = ReadFileToString(sources.proc_root + "/version", nullptr)) {
    facts.proc_version = std::string(TrimSpace(*version));
  }
  return facts;
}

}  // namespace faultline::sys
