// A kernel label's one parser and one printer (common/kernel_label.h).
#include "common/kernel_label.h"

#include <gtest/gtest.h>

#include <string>

namespace faultline {
namespace {

TEST(KernelLabel, AnInstalledKernelIsItsName) {
  const KernelLabel label = KernelLabel::Parse("vanilla");
  EXPECT_EQ(label.name, "vanilla");
  EXPECT_FALSE(label.source.has_value());
  EXPECT_EQ(label.slot, "");
  EXPECT_EQ(label.ToString(), "vanilla");
}

TEST(KernelLabel, ABuiltKernelCarriesItsSource) {
  const KernelLabel label = KernelLabel::Parse("patched@3f9c2a1b04de");
  EXPECT_EQ(label.name, "patched");
  EXPECT_EQ(label.source, "3f9c2a1b04de");
  EXPECT_EQ(label.slot, "");
  EXPECT_EQ(label.WithoutSlot(), "patched@3f9c2a1b04de");
}

TEST(KernelLabel, AScheduleSlotIsTakenInItsExactFormOnly) {
  const KernelLabel slot = KernelLabel::Parse("nightly@3f9c2a1b04de+20261203T0200");
  EXPECT_EQ(slot.name, "nightly");
  EXPECT_EQ(slot.source, "3f9c2a1b04de");
  EXPECT_EQ(slot.slot, "20261203T0200");
  EXPECT_EQ(slot.WithoutSlot(), "nightly@3f9c2a1b04de");
  // Not a slot: the source is what follows the '@', as written.
  for (const char* text : {"n@3f9c2a1b04de+2026120T0200", "n@3f9c2a1b04de+20261203X0200",
                           "n@3F9C2A1B04DE+20261203T0200", "n@3f9c2a1b04d+20261203T0200",
                           "n@3f9c2a1b04de+20261203T02000", "@3f9c2a1b04de+20261203T0200"}) {
    const KernelLabel label = KernelLabel::Parse(text);
    EXPECT_EQ(label.slot, "") << text;
    EXPECT_EQ(label.WithoutSlot(), text) << text;
  }
}

TEST(KernelLabel, PrintingWhatWasParsedGivesTheTextBack) {
  for (const char* text : {"", "a", "a@", "@", "@x", "a@b@c", "a@x+y", "patched@3f9c2a1b04de",
                           "nightly@3f9c2a1b04de+20261203T0200", "a@3f9c2a1b04de+"}) {
    EXPECT_EQ(KernelLabel::Parse(text).ToString(), text) << text;
  }
  const KernelLabel built{"patched", "3f9c2a1b04de", "20261203T0200"};
  EXPECT_EQ(KernelLabel::Parse(built.ToString()), built);
}

}  // namespace
}  // namespace faultline
