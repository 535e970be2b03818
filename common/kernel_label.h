#pragma once
// A job's kernel label and what it says, with one parser and one printer:
//
//   vanilla                              a kernel the boards have (the spec's label)
//   patched@3f9c2a1b04de                 built from a source: 12 hex of the sha256 of the
//                                        source it resolved to (kernel_sources.h)
//   nightly@3f9c2a1b04de+20261203T0200   the same, for one slot of a schedule that follows a
//                                        branch (the slot's UTC minute)
//
// Labels a user writes may not contain '@' (the controller refuses them), so everything
// after the first '@' is the controller's.
#include <optional>
#include <string>
#include <string_view>

namespace faultline {

struct KernelLabel {
  std::string name;                   // the spec's label: "patched"
  std::optional<std::string> source;  // "3f9c2a1b04de"; none for an installed kernel
  std::string slot;                   // "20261203T0200"; "" outside a schedule

  // Never fails: a slot is taken only in its exact form (a name, '@', 12 hex digits, '+',
  // 8 digits, 'T', 4 digits); anything else after the '@' is the source as written.
  static KernelLabel Parse(std::string_view text);
  // name[@source[+slot]]: Parse(text).ToString() == text for every text.
  std::string ToString() const;
  // The label without its slot: the series a schedule's slots belong to (itself when it has
  // no slot).
  std::string WithoutSlot() const;

  bool operator==(const KernelLabel&) const = default;
};

}  // namespace faultline
