#include "agent/sys/user_symbols.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

// A function of this test binary with a C name, kept out of line: its own frame.
extern "C" __attribute__((noinline, used)) int faultline_user_symbols_marker(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

namespace faultline::sys {
namespace {

TEST(ParseExecutableMappings, KeepsExecutableFileMappings) {
  const auto mappings = ParseExecutableMappings(
      "55d0c0a00000-55d0c0a20000 r--p 00000000 fe:01 123 /opt/faultline/bin/faultline-workload\n"
      "55d0c0a20000-55d0c0a80000 r-xp 00020000 fe:01 123 /opt/faultline/bin/faultline-workload\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f1000028000-7f100019d000 r-xp 00028000 fe:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f2000000000-7f2000001000 r-xp 00000000 00:00 0                          [vdso]\n"
      "7f3000000000-7f3000001000 r-xp 00000000 fe:01 9 /tmp/gone (deleted)\n"
      "garbage\n");
  ASSERT_EQ(mappings.size(), 4u);
  EXPECT_EQ(mappings[0].start, 0x55d0c0a20000u);
  EXPECT_EQ(mappings[0].end, 0x55d0c0a80000u);
  EXPECT_EQ(mappings[0].offset, 0x20000u);
  EXPECT_EQ(mappings[0].path, "/opt/faultline/bin/faultline-workload");
  EXPECT_EQ(mappings[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(mappings[2].path, "[vdso]");
  EXPECT_EQ(mappings[3].path, "/tmp/gone (deleted)");
}

TEST(ShortFunctionName, DemangledAndShortened) {
  EXPECT_EQ(ShortFunctionName("handle_page"), "handle_page");
  EXPECT_EQ(ShortFunctionName("__munmap"), "__munmap");
  // faultline::sys::ParseExecutableMappings(std::basic_string_view<char, ...>)
  EXPECT_EQ(ShortFunctionName("_ZN9faultline3sys23ParseExecutableMappingsESt17basic_string_"
                              "viewIcSt11char_traitsIcEE"),
            "ParseExecutableMappings");
  // (anonymous namespace)::Reader<int>::Touch(unsigned long) const
  EXPECT_EQ(ShortFunctionName("_ZNK12_GLOBAL__N_16ReaderIiE5TouchEm"), "Touch");
  // std::function's operator(): the call operator keeps its parentheses.
  EXPECT_EQ(ShortFunctionName("_ZNKSt8functionIFvvEEclEv"), "operator()");
  // Not mangled after all: left as it is.
  EXPECT_EQ(ShortFunctionName("_Znot_a_name"), "_Znot_a_name");
}

TEST(UserSymbols, NamesThisBinaryAndLibc) {
  const auto marker = reinterpret_cast<uintptr_t>(&faultline_user_symbols_marker);
  const auto in_getpid = reinterpret_cast<uintptr_t>(&::getpid);
  const UserSymbols symbols = UserSymbols::LoadFor({marker + 1, marker, in_getpid, 16});
  EXPECT_EQ(symbols.Name(marker), "agent_sys_test:faultline_user_symbols_marker");
  EXPECT_EQ(symbols.Name(marker + 1), "agent_sys_test:faultline_user_symbols_marker");
  // getpid is libc's, or this binary's own where libc is linked in (the static riscv64
  // build, cross_build_static_riscv64).
  std::stringstream maps;
  maps << std::ifstream("/proc/self/maps").rdbuf();
  const std::string object =
      maps.str().find("/libc.so.6") != std::string::npos ? "libc.so.6:" : "agent_sys_test:";
  const std::string libc = symbols.Name(in_getpid);
  EXPECT_EQ(libc.rfind(object, 0), 0u) << libc;
  EXPECT_NE(libc.find("getpid"), std::string::npos) << libc;
  EXPECT_EQ(symbols.Name(16), "[user]") << "outside every mapping";
  EXPECT_EQ(symbols.Name(marker + 2), "[user]") << "not asked for";
  EXPECT_TRUE(IsUserFrameName(symbols.Name(marker)));
  EXPECT_TRUE(IsUserFrameName("[user]"));
  EXPECT_FALSE(IsUserFrameName("handle_mm_fault"));
  EXPECT_EQ(faultline_user_symbols_marker(1), 4);
}

TEST(UserSymbols, ObjectsWithoutSymbolsAreNamedByTheObject) {
  // An executable mapping of a file that is not ELF: the object, no function.
  char path[] = "/tmp/faultline-user-symbols-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "not an ELF file", 15), 15);
  ::close(fd);
  const std::string maps = "10000-20000 r-xp 00000000 fe:01 1 " + std::string(path) + "\n";
  const UserSymbols symbols = UserSymbols::FromMaps(maps, {0x10010, 0x30000});
  ::unlink(path);
  EXPECT_EQ(symbols.Name(0x10010), std::string(path).substr(5) + ":?");
  EXPECT_EQ(symbols.Name(0x30000), "[user]");
}

}  // namespace
}  // namespace faultline::sys
