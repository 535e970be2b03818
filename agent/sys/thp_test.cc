#include "agent/sys/thp.h"

#include <gtest/gtest.h>

#include "agent/sys/environment.h"

namespace faultline::sys {
namespace {

TEST(ParseBracketedChoice, PicksTheActiveWord) {
  EXPECT_EQ(ParseBracketedChoice("always [madvise] never\n"), "madvise");
  EXPECT_EQ(ParseBracketedChoice("always within_size advise [never] deny force"), "never");
  EXPECT_EQ(ParseBracketedChoice("[lzo] lzo-rle lz4 zstd"), "lzo");
  EXPECT_EQ(ParseBracketedChoice("schedutil"), "");
}

TEST(ParseSmapsFor, FindsTheBlockOfOneMapping) {
  const char* smaps =
      "7f0000000000-7f0000200000 rw-s 00000000 00:01 1234    /memfd:x (deleted)\n"
      "Size:               2048 kB\n"
      "Rss:                2048 kB\n"
      "ShmemPmdMapped:     2048 kB\n"
      "VmFlags: rd wr sh mr mw me ms sd\n"
      "7f0000200000-7f0000210000 rw-s 00000000 00:01 1234    /memfd:x (deleted)\n"
      "Size:                 64 kB\n"
      "Rss:                   0 kB\n";
  auto big = ParseSmapsFor(smaps, 0x7f0000000000);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->at("ShmemPmdMapped"), 2048u);
  EXPECT_EQ(big->at("Rss"), 2048u);
  EXPECT_EQ(big->count("VmFlags"), 0u);
  auto small = ParseSmapsFor(smaps, 0x7f0000200000);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->at("Size"), 64u);
  EXPECT_FALSE(ParseSmapsFor(smaps, 0x1000));
}

TEST(Fnv1a64Hex, KnownVectors) {
  EXPECT_EQ(Fnv1a64Hex(""), "cbf29ce484222325");
  EXPECT_EQ(Fnv1a64Hex("a"), "af63dc4c8601ec8c");
}

TEST(EnvironmentFingerprint, VirtAccelFromTheLabsCmdlineOrTheHypervisorLeaf) {
  EXPECT_EQ(VirtAccel("console=ttyS0 faultline.virt_accel=tcg quiet", "KVMKVMKVM\0\0\0"), "tcg");
  EXPECT_EQ(VirtAccel("root=/dev/vda", std::string("KVMKVMKVM\0\0\0", 12)), "kvm");
  EXPECT_EQ(VirtAccel("root=/dev/vda", "TCGTCGTCGTCG"), "tcg");
  EXPECT_EQ(VirtAccel("root=/dev/vda", ""), "none");
  EXPECT_EQ(VirtAccel("faultline.virt_accel=", ""), "none");  // empty value: ignored
  // Named, never raw: bhyve's signature is "bhyve bhyve " (a trailing space).
  EXPECT_EQ(VirtAccel("root=/dev/vda", "bhyve bhyve "), "bhyve");
  EXPECT_EQ(VirtAccel("root=/dev/vda", " lrpepyh  vr"), "parallels");
  EXPECT_EQ(VirtAccel("root=/dev/vda", "Microsoft Hv"), "hyperv");
  EXPECT_EQ(VirtAccel("root=/dev/vda", std::string("ABCDABCD\0\0\0\0", 12)), "abcdabcd");
  EXPECT_EQ(VirtAccel("root=/dev/vda", "Odd  Visor  "), "odd visor");
}

TEST(EnvironmentFingerprint, KernelConfigFlags) {
  const std::string config = "CONFIG_PER_VMA_LOCK=y\n# CONFIG_MEMCG_V1 is not set\nCONFIG_ZRAM=m\n";
  EXPECT_EQ(KernelConfigFlag(config, "PER_VMA_LOCK"), "y");
  EXPECT_EQ(KernelConfigFlag(config, "MEMCG_V1"), "n");
  EXPECT_EQ(KernelConfigFlag(config, "ZRAM"), "y");
  EXPECT_EQ(KernelConfigFlag(config, "LRU_GEN"), "n");
  EXPECT_EQ(KernelConfigFlag(config, "PER_VMA"), "n");  // a prefix is not the option
}

TEST(EnvironmentFingerprint, HasTheIssuesKeysOnThisHost) {
  auto env = CollectEnvironmentFingerprint();
  for (const char* key : {"kernel.release", "swap.devices", "swap.total_bytes", "cpu.arch",
                          "cpu.model", "cpu.count", "cpu.governor", "page_size",
                          "memory.total_bytes", "cgroup.version", "virt.accel", "mm.lru_gen"}) {
    EXPECT_TRUE(env.count(key)) << key;
  }
  EXPECT_NE(env.at("page_size"), "0");
  // Present wherever procfs/THP are (not under every qemu-user or container).
  if (env.count("kernel.version")) {
    EXPECT_NE(env.at("kernel.version").find("Linux"), std::string::npos);
  }
  if (env.count("thp.enabled")) {
    EXPECT_FALSE(env.at("thp.enabled").empty());
  }
}

}  // namespace
}  // namespace faultline::sys
