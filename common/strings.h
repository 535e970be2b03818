#pragma once
// String helpers shared by every component, cross-built for boards too (so not Abseil's,
// which the portable parts do not link).
#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

// Without leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r).
inline std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `text` on one line: each line break ("\n", "\r\n" or a lone "\r") becomes `separator`,
// and trailing spaces and separator characters are dropped. For messages and key=value files.
inline std::string OneLine(std::string_view text, std::string_view separator = " ") {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // "\r\n": one break
    if (c == '\n' || c == '\r') {
      out += separator;
    } else {
      out += c;
    }
  }
  while (!out.empty() &&
         (out.back() == ' ' || separator.find(out.back()) != std::string_view::npos)) {
    out.pop_back();
  }
  return out;
}

// The parts with `separator` between them ("" for none).
inline std::string JoinStrings(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

// A hypervisor's name from its CPUID signature (leaf 0x40000000: "KVMKVMKVM\0\0\0",
// "bhyve bhyve ", " lrpepyh  vr") or from a value an older agent stored raw: the known
// signatures by name ("kvm", "bhyve", "parallels"), anything else trimmed, NULs and
// non-printables dropped, a word repeated to fill the twelve bytes kept once, lower case.
inline std::string HypervisorName(std::string_view vendor) {
  static constexpr std::pair<std::string_view, std::string_view> kKnown[] = {
      {"KVMKVMKVM", "kvm"},         {"TCGTCGTCGTCG", "tcg"},        {"Microsoft Hv", "hyperv"},
      {"VMwareVMware", "vmware"},   {"XenVMMXenVMM", "xen"},        {"bhyve bhyve", "bhyve"},
      {"lrpepyh  vr", "parallels"}, {"VBoxVBoxVBox", "virtualbox"}, {"ACRNACRNACRN", "acrn"},
      {"QNXQVMBSQG", "qnx"},        {"Linux KVM Hv", "kvm"},        {"HAXMHAXMHAXM", "haxm"},
      {"VirtualApple", "apple"}};
  std::string printable;
  for (char c : vendor) {
    if (c >= 0x20 && c < 0x7f) printable += c;
  }
  const std::string trimmed(TrimSpace(printable));
  for (const auto& [signature, name] : kKnown) {
    if (trimmed == signature) return std::string(name);
  }
  std::vector<std::string> words;
  std::string word;
  for (char c : trimmed + " ") {
    if (c != ' ') {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  bool repeated = words.size() > 1;
  for (const std::string& w : words) repeated &= w == words.front();
  if (repeated) return words.front();
  return JoinStrings(words, " ");
}

}  // namespace faultline
