#pragma once
// User-space frames of this process by name (issue #46): an address -> the ELF object mapped
// there (/proc/self/maps) and the function symbol that contains it (the object's .symtab,
// else its .dynsym), as "OBJECT:FUNCTION" ("faultline-workload:TouchPages",
// "libc.so.6:__munmap"). The workload samples its own threads, so their user addresses are
// this process's. Only the symbols the addresses need are kept: the objects' symbol tables
// are streamed in chunks, as KernelSymbols::LoadFor does for the kernel's (the run's memory
// cgroup measures this process).
//
// A frame is named "OBJECT:?" when the object has no function symbol there (a stripped
// object without a .dynsym entry for it) and "[user]" outside any executable file mapping.
// The vdso ("[vdso]:__vdso_clock_gettime") is read from this process's memory. C++ names are
// demangled and shortened to the function's own name
// ("faultline::workloads::(anonymous namespace)::Reader::Touch(unsigned long)" -> "Touch"):
// frame names are table cells and counter names.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::sys {

// One executable file mapping of /proc/self/maps.
struct ExecutableMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;  // in the file
  std::string path;
};

// The executable (x) mappings of a maps text that have a path ("/usr/lib/...", "[vdso]").
std::vector<ExecutableMapping> ParseExecutableMappings(std::string_view maps_text);

// A symbol as a frame shows it: demangled, without namespaces, classes' scopes, template
// arguments or parameters ("_ZN9faultline3fooEv" -> "foo"; C names as they are).
std::string ShortFunctionName(std::string_view symbol);

// The frame name of a user address: "OBJECT:FUNCTION", "OBJECT:?" or "[user]".
inline bool IsUserFrameName(std::string_view frame) {
  return frame == "[user]" || frame.find(':') != std::string_view::npos;
}

class UserSymbols {
 public:
  // Names `addresses` of this process from its /proc/self/maps.
  static UserSymbols LoadFor(std::vector<uint64_t> addresses);
  // The same from a maps text (its objects opened by path; for tests).
  static UserSymbols FromMaps(std::string_view maps_text, std::vector<uint64_t> addresses);
  // The frame name of an address given to LoadFor ("[user]" for any other).
  std::string Name(uint64_t address) const;
  size_t size() const { return names_.size(); }

 private:
  std::map<uint64_t, std::string> names_;
};

}  // namespace faultline::sys
