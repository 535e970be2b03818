#include "agent/sys/user_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "agent/sys/file_io.h"
#include "agent/sys/unique_fd.h"

namespace faultline::sys {
namespace {

constexpr size_t kSymbolsPerChunk = 2048;  // 48 KiB of Elf64_Sym at a time
constexpr size_t kMaxNameLength = 512;

// Reads an ELF image: a file by descriptor, or the vdso from this process's memory.
class ElfReader {
 public:
  static ElfReader File(UniqueFd fd) { return ElfReader(std::move(fd), nullptr, 0); }
  static ElfReader Memory(const unsigned char* base, uint64_t size) {
    return ElfReader(UniqueFd(), base, size);
  }
  bool Read(uint64_t offset, void* out, size_t n) const {
    if (memory_ != nullptr) {
      if (offset > memory_size_ || n > memory_size_ - offset) return false;
      std::memcpy(out, memory_ + offset, n);
      return true;
    }
    auto* bytes = static_cast<unsigned char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_.get(), bytes, n, static_cast<off_t>(offset));
      if (got <= 0) return false;
      bytes += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  // A NUL-terminated string at `offset` (at most kMaxNameLength characters).
  std::string ReadString(uint64_t offset) const {
    char buffer[kMaxNameLength + 1] = {};
    size_t n = kMaxNameLength;
    if (memory_ != nullptr) {
      if (offset >= memory_size_) return "";
      n = std::min<uint64_t>(n, memory_size_ - offset);
      std::memcpy(buffer, memory_ + offset, n);
    } else {
      const ssize_t got = ::pread(fd_.get(), buffer, n, static_cast<off_t>(offset));
      if (got <= 0) return "";
      n = static_cast<size_t>(got);
    }
    return std::string(buffer, strnlen(buffer, n));
  }

 private:
  ElfReader(UniqueFd fd, const unsigned char* memory, uint64_t size)
      : fd_(std::move(fd)), memory_(memory), memory_size_(size) {}
  UniqueFd fd_;
  const unsigned char* memory_;
  uint64_t memory_size_;
};

struct Wanted {
  uint64_t vaddr;    // in the object's own addresses (its symbols' st_value)
  uint64_t address;  // in this process
};

// The best symbol found so far for one wanted address.
struct Candidate {
  bool found = false;
  uint64_t name_offset = 0;
  int rank = 0;  // global 3, weak 2, local 1: an alias's most public name wins
};

int BindingRank(unsigned char info) {
  switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL:
      return 3;
    case STB_WEAK:
      return 2;
    default:
      return 1;
  }
}

// Names `wanted` (sorted by vaddr) from one object's symbols: .symtab if it has one, else
// .dynsym. Writes "OBJECT:FUNCTION" or "OBJECT:?" into *names.
void NameFromElf(const ElfReader& elf, const std::string& object, const std::vector<Wanted>& wanted,
                 std::map<uint64_t, std::string>* names) {
  auto unnamed = [&] {
    for (const Wanted& w : wanted) (*names)[w.address] = object + ":?";
  };
  Elf64_Ehdr header;
  if (!elf.Read(0, &header, sizeof(header)) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr)) {
    return unnamed();
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !elf.Read(header.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr))) {
    return unnamed();
  }
  const Elf64_Shdr* table = nullptr;
  for (const auto& s : sections) {
    if (s.sh_type == SHT_SYMTAB) table = &s;
  }
  if (table == nullptr) {
    for (const auto& s : sections) {
      if (s.sh_type == SHT_DYNSYM) table = &s;
    }
  }
  if (table == nullptr || table->sh_link >= sections.size() ||
      table->sh_entsize != sizeof(Elf64_Sym)) {
    return unnamed();
  }
  const Elf64_Shdr& strings = sections[table->sh_link];
  std::vector<Candidate> best(wanted.size());
  const uint64_t count = table->sh_size / sizeof(Elf64_Sym);
  std::vector<Elf64_Sym> chunk(kSymbolsPerChunk);
  for (uint64_t first = 0; first < count; first += kSymbolsPerChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kSymbolsPerChunk, count - first));
    if (!elf.Read(table->sh_offset + first * sizeof(Elf64_Sym), chunk.data(),
                  n * sizeof(Elf64_Sym))) {
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      const Elf64_Sym& sym = chunk[i];
      const unsigned type = ELF64_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_size == 0 || sym.st_name == 0) {
        continue;
      }
      auto it = std::lower_bound(wanted.begin(), wanted.end(), sym.st_value,
                                 [](const Wanted& w, uint64_t v) { return w.vaddr < v; });
      for (; it != wanted.end() && it->vaddr < sym.st_value + sym.st_size; ++it) {
        Candidate& c = best[static_cast<size_t>(it - wanted.begin())];
        const int rank = BindingRank(sym.st_info);
        if (!c.found || rank > c.rank) c = {true, sym.st_name, rank};
      }
    }
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    std::string name;
    if (best[i].found)
      name = ShortFunctionName(elf.ReadString(strings.sh_offset + best[i].name_offset));
    (*names)[wanted[i].address] = object + ":" + (name.empty() ? "?" : name);
  }
}

// The object's PT_LOAD segments (empty when it is no 64-bit ELF): read once per object.
std::vector<Elf64_Phdr> LoadSegments(const ElfReader& elf) {
  Elf64_Ehdr header;
  if (!elf.Read(0, &header, sizeof(header)) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_phentsize != sizeof(Elf64_Phdr)) {
    return {};
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (segments.empty() ||
      !elf.Read(header.e_phoff, segments.data(), segments.size() * sizeof(Elf64_Phdr))) {
    return {};
  }
  segments.erase(std::remove_if(segments.begin(), segments.end(),
                                [](const Elf64_Phdr& p) { return p.p_type != PT_LOAD; }),
                 segments.end());
  return segments;
}

// The object's own address of a file offset: through the segment holding it.
bool FileOffsetToVaddr(const std::vector<Elf64_Phdr>& segments, uint64_t file_offset,
                       uint64_t* vaddr) {
  for (const auto& p : segments) {
    if (file_offset >= p.p_offset && file_offset < p.p_offset + p.p_filesz) {
      *vaddr = file_offset - p.p_offset + p.p_vaddr;
      return true;
    }
  }
  return false;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Drops what lies between matching `open` and `close` (nested), e.g. template arguments.
std::string DropBracketed(std::string_view text, char open, char close) {
  std::string out;
  int depth = 0;
  for (char c : text) {
    if (c == open) {
      ++depth;
    } else if (c == close && depth > 0) {
      --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<ExecutableMapping> ParseExecutableMappings(std::string_view maps_text) {
  std::vector<ExecutableMapping> mappings;
  size_t at = 0;
  while (at < maps_text.size()) {
    size_t end = maps_text.find('\n', at);
    if (end == std::string_view::npos) end = maps_text.size();
    const std::string line(maps_text.substr(at, end - at));
    at = end + 1;
    unsigned long long start = 0, stop = 0, offset = 0;
    char perms[8] = {};
    int path_at = 0;
    // start-end perms offset dev inode path
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &stop, perms, &offset,
                    &path_at) < 4 ||
        path_at <= 0 || std::strlen(perms) < 3 || perms[2] != 'x') {
      continue;
    }
    std::string path = line.substr(static_cast<size_t>(path_at));
    while (!path.empty() && path.back() == ' ') path.pop_back();
    if (path.empty()) continue;
    mappings.push_back({start, stop, offset, std::move(path)});
  }
  return mappings;
}

std::string ShortFunctionName(std::string_view symbol) {
  std::string name(symbol);
  if (name.rfind("_Z", 0) == 0) {
    int status = -1;
    std::unique_ptr<char, void (*)(void*)> demangled(
        abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
    if (status == 0 && demangled) name = demangled.get();
  }
  // "operator()" keeps its parentheses; other parameter lists, template arguments and
  // scopes go: "ns::(anonymous namespace)::Reader<int>::Touch(unsigned long) const" -> "Touch".
  const std::string kCall = "operator()";
  std::string kept;
  for (size_t i = 0; i < name.size();) {
    if (name.compare(i, kCall.size(), kCall) == 0) {
      kept += "operator{call}";
      i += kCall.size();
    } else {
      kept += name[i++];
    }
  }
  kept = DropBracketed(DropBracketed(kept, '(', ')'), '<', '>');
  if (const size_t scope = kept.rfind("::"); scope != std::string::npos)
    kept = kept.substr(scope + 2);
  // Qualifiers after the parameters (" const", " &&"); "operator new" keeps its space.
  for (const std::string_view qualifier : {" const", " volatile", " &&", " &", " noexcept"}) {
    if (kept.size() > qualifier.size() &&
        kept.compare(kept.size() - qualifier.size(), qualifier.size(), qualifier) == 0) {
      kept.resize(kept.size() - qualifier.size());
    }
  }
  if (const size_t space = kept.find(' ');
      space != std::string::npos && kept.rfind("operator", 0) != 0) {
    kept.resize(space);
  }
  if (const size_t call = kept.find("operator{call}"); call != std::string::npos) {
    kept.replace(call, 14, kCall);
  }
  // A frame is one token of a folded stack: no separators, no spaces.
  for (char& c : kept) {
    if (c == ';' || c == ' ' || c == ':') c = '_';
  }
  return kept.empty() ? std::string(symbol.substr(0, 64)) : kept;
}

UserSymbols UserSymbols::LoadFor(std::vector<uint64_t> addresses) {
  std::string error;
  auto text = ReadFileToString("/proc/self/maps", &error);
  return FromMaps(text ? *text : std::string(), std::move(addresses));
}

UserSymbols UserSymbols::FromMaps(std::string_view maps_text, std::vector<uint64_t> addresses) {
  UserSymbols symbols;
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  const std::vector<ExecutableMapping> mappings = ParseExecutableMappings(maps_text);
  // The addresses by object (a path may be mapped in several executable pieces).
  std::map<std::string, std::vector<std::pair<uint64_t, const ExecutableMapping*>>> by_object;
  for (uint64_t address : addresses) {
    for (const auto& m : mappings) {
      if (address >= m.start && address < m.end) {
        by_object[m.path].emplace_back(address, &m);
        break;
      }
    }
  }
  for (const auto& [path, hits] : by_object) {
    const ExecutableMapping& first = *hits.front().second;
    std::string object;
    std::optional<ElfReader> elf;
    if (path == "[vdso]") {
      object = path;
      elf = ElfReader::Memory(reinterpret_cast<const unsigned char*>(first.start),
                              first.end - first.start);
    } else if (path.front() == '/') {
      const std::string kDeleted = " (deleted)";
      std::string file = path;
      if (file.size() > kDeleted.size() &&
          file.compare(file.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
        char range[64];
        std::snprintf(range, sizeof(range), "/proc/self/map_files/%llx-%llx",
                      static_cast<unsigned long long>(first.start),
                      static_cast<unsigned long long>(first.end));
        file = range;
        object = BaseName(path.substr(0, path.size() - kDeleted.size()));
      } else {
        object = BaseName(path);
      }
      UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
      if (fd) elf = ElfReader::File(std::move(fd));
    }
    if (object.empty()) continue;  // another pseudo mapping: "[user]"
    const std::vector<Elf64_Phdr> segments = elf ? LoadSegments(*elf) : std::vector<Elf64_Phdr>();
    std::vector<Wanted> wanted;
    for (const auto& [address, mapping] : hits) {
      uint64_t vaddr = 0;
      if (FileOffsetToVaddr(segments, address - mapping->start + mapping->offset, &vaddr)) {
        wanted.push_back({vaddr, address});
      } else {
        symbols.names_[address] = object + ":?";
      }
    }
    if (wanted.empty()) continue;
    std::sort(wanted.begin(), wanted.end(),
              [](const Wanted& a, const Wanted& b) { return a.vaddr < b.vaddr; });
    NameFromElf(*elf, object, wanted, &symbols.names_);
  }
  return symbols;
}

std::string UserSymbols::Name(uint64_t address) const {
  auto it = names_.find(address);
  return it == names_.end() ? std::string("[user]") : it->second;
}

}  // namespace faultline::sys
