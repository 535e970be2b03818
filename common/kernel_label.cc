#include "common/kernel_label.h"

#include <algorithm>

namespace faultline {
namespace {

bool All(std::string_view text, bool (*pred)(char)) {
  return std::all_of(text.begin(), text.end(), pred);
}
bool Digit(char c) {
  return c >= '0' && c <= '9';
}
bool LowerHex(char c) {
  return Digit(c) || (c >= 'a' && c <= 'f');
}

// "20261203T0200"
bool IsSlot(std::string_view s) {
  return s.size() == 13 && s[8] == 'T' && All(s.substr(0, 8), Digit) && All(s.substr(9), Digit);
}

}  // namespace

KernelLabel KernelLabel::Parse(std::string_view text) {
  KernelLabel label;
  const size_t at = text.find('@');
  label.name = std::string(text.substr(0, at));
  if (at == std::string_view::npos) return label;
  std::string_view rest = text.substr(at + 1);
  if (const size_t plus = rest.find('+');
      at > 0 && plus == 12 && All(rest.substr(0, 12), LowerHex) && IsSlot(rest.substr(plus + 1))) {
    label.slot = std::string(rest.substr(plus + 1));
    rest = rest.substr(0, plus);
  }
  label.source = std::string(rest);
  return label;
}

std::string KernelLabel::ToString() const {
  std::string out = name;
  if (source.has_value()) out += "@" + *source;
  if (!slot.empty()) out += "+" + slot;
  return out;
}

std::string KernelLabel::WithoutSlot() const {
  KernelLabel series = *this;
  series.slot.clear();
  return series.ToString();
}

}  // namespace faultline
