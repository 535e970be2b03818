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

// `text` as valid UTF-8: every byte that does not begin a well-formed sequence (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), and NUL, becomes U+FFFD. For text from
// strangers (mail, build logs) on its way into a text column or a reply.
inline std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
    if (b < 0x80) {
      len = b == 0 ? 0 : 1;  // NUL too: PostgreSQL's text refuses it
    } else if (b >= 0xc2 && b <= 0xdf) {
      len = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
      len = 3;
      if (b == 0xe0) lo = 0xa0;
      if (b == 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      len = 4;
      if (b == 0xf0) lo = 0x90;
      if (b == 0xf4) hi = 0x8f;
    }
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xbf);
    }
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
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
