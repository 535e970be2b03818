// The sampler's pure parts: kernel symbols by address, the ring buffer's records (wrapping
// around its end, lost records), and the folded stacks.
#include "agent/sys/stack_sampler.h"

#include <linux/perf_event.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace faultline::sys {
namespace {

TEST(KernelSymbols, NamesTheFunctionContainingAnAddress) {
  const KernelSymbols symbols = KernelSymbols::Parse(
      "ffffffff81000000 T _stext\n"
      "ffffffff81200000 t handle_mm_fault\n"
      "ffffffff81100000 T lock_vma_under_rcu\n"
      "ffffffff81300000 D some_data\n"
      "ffffffff81400000 W weak_fn\n"
      "ffffffffc0000000 t mod_fn\t[zram]\n"
      "garbage\n");
  EXPECT_EQ(symbols.size(), 5u) << "text symbols only";
  EXPECT_EQ(symbols.Name(0xffffffff81200010), "handle_mm_fault");
  EXPECT_EQ(symbols.Name(0xffffffff81100000), "lock_vma_under_rcu");
  EXPECT_EQ(symbols.Name(0xffffffff81300010), "handle_mm_fault") << "data is not a function";
  EXPECT_EQ(symbols.Name(0xffffffffc0000004), "mod_fn");
  EXPECT_EQ(symbols.Name(0x1000), "") << "before the first symbol";
  // kptr_restrict: every address 0, nothing to name with.
  EXPECT_EQ(KernelSymbols::Parse("0000000000000000 T _stext\n").size(), 0u);
}

TEST(KernelSymbols, LoadForKeepsOnlyTheSymbolsThatNameTheAddresses) {
  char path[] = "/tmp/faultline-kallsyms-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "ffffffff81000000 T _stext\nffffffff81100000 T lock_vma_under_rcu\n"
      "ffffffff81200000 t handle_mm_fault\nffffffff81200000 t handle_mm_fault_alias\n"
      "ffffffff81300000 D data\nffffffff81400000 T unused\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  std::string error;
  auto symbols =
      KernelSymbols::LoadFor(path, {0xffffffff81200040, 0xffffffff81100008, 0x10}, &error);
  ::unlink(path);
  ASSERT_TRUE(symbols.has_value()) << error;
  EXPECT_EQ(symbols->size(), 2u) << "the two functions named, nothing else";
  EXPECT_EQ(symbols->Name(0xffffffff81200040), "handle_mm_fault_alias") << "an alias: the last";
  EXPECT_EQ(symbols->Name(0xffffffff81100008), "lock_vma_under_rcu");
  EXPECT_FALSE(KernelSymbols::LoadFor("/nonexistent/kallsyms", {1}, &error).has_value());
  EXPECT_NE(error.find("/nonexistent/kallsyms"), std::string::npos) << error;
}

// A ring of `size` bytes with records written from `start`, wrapping around.
class Ring {
 public:
  Ring(uint64_t size, uint64_t start) : data_(size), head_(start), tail_(start) {}
  void Put(const std::vector<uint64_t>& words, uint32_t type) {
    struct perf_event_header h {};
    h.type = type;
    h.size = static_cast<uint16_t>(sizeof(h) + 8 * words.size());
    uint64_t header = 0;
    std::memcpy(&header, &h, sizeof(h));
    Word(header);
    for (uint64_t w : words) Word(w);
  }
  DrainedSamples Parse() const {
    return ParseRingRecords(data_.data(), data_.size(), tail_, head_);
  }

 private:
  void Word(uint64_t w) {
    for (size_t i = 0; i < 8; ++i) data_[(head_ + i) % data_.size()] = (w >> (8 * i)) & 0xff;
    head_ += 8;
  }
  std::vector<unsigned char> data_;
  uint64_t head_, tail_;
};

TEST(RingRecords, SamplesSplitIntoKernelAndUserChainsAcrossTheWrap) {
  Ring ring(256, 200);  // the second record crosses the end
  const uint64_t kernel = static_cast<uint64_t>(PERF_CONTEXT_KERNEL);
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  ring.Put({0x10, 0x0000002a0000002a, 4, kernel, 0xa1, 0xa2, 0}, PERF_RECORD_SAMPLE);
  ring.Put({7, 3}, PERF_RECORD_LOST);
  ring.Put({0x10, 1, 5, kernel, 0xb1, user, 0x401000, 0x402000}, PERF_RECORD_SAMPLE);
  const DrainedSamples out = ring.Parse();
  ASSERT_EQ(out.chains.size(), 2u);
  EXPECT_EQ(out.chains[0].kernel, (std::vector<uint64_t>{0xa1, 0xa2, 0}));
  EXPECT_TRUE(out.chains[0].user.empty());
  EXPECT_EQ(out.chains[1].kernel, (std::vector<uint64_t>{0xb1}));
  EXPECT_EQ(out.chains[1].user, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(out.lost, 3u);
}

TEST(RingRecords, ATornRecordEndsTheRead) {
  Ring ring(128, 0);
  ring.Put({0x10, 1, 99}, PERF_RECORD_SAMPLE);  // says 99 frames, has none
  EXPECT_TRUE(ring.Parse().chains.empty());
}

TEST(FoldedStacks, RootFirstUserBelowTheKernel) {
  const KernelSymbols symbols = KernelSymbols::Parse(
      "1000 T asm_exc_page_fault\n2000 T handle_mm_fault\n3000 T filemap_fault\n");
  std::map<std::string, uint64_t> folded;
  FoldChains({{{0x3004, 0x2008, 0x1010}, {0x401000}},
              {{0x3004, 0x2008, 0x1010}, {0x401000}},
              {{0x2008, 0x1010}, {}},
              {{0x10}, {}},
              {{}, {}}},
             symbols, &folded);
  EXPECT_EQ(folded, (std::map<std::string, uint64_t>{
                        {"[user];asm_exc_page_fault;handle_mm_fault;filemap_fault", 2},
                        {"asm_exc_page_fault;handle_mm_fault", 1},
                        {"0x10", 1}}));
}

}  // namespace
}  // namespace faultline::sys
