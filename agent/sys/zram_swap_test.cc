#include "agent/sys/zram_swap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace faultline::sys {
namespace {

TEST(FormatSwapHeader, VersionLastPageAndMagicWhereTheKernelLooks) {
  for (size_t page_size : {size_t{4096}, size_t{16384}, size_t{65536}}) {
    std::vector<unsigned char> page(page_size, 0);
    ASSERT_TRUE(FormatSwapHeader(page.data(), page.size(), 64ull << 20));
    uint32_t version = 0, last_page = 0, bad = 1;
    std::memcpy(&version, page.data() + 1024, 4);
    std::memcpy(&last_page, page.data() + 1028, 4);
    std::memcpy(&bad, page.data() + 1032, 4);
    EXPECT_EQ(version, 1u);
    EXPECT_EQ(last_page, (64ull << 20) / page_size - 1);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(std::memcmp(page.data() + page_size - 10, "SWAPSPACE2", 10), 0);
  }
  std::vector<unsigned char> page(4096, 0);
  EXPECT_FALSE(FormatSwapHeader(page.data(), page.size(), 4096 * 5));  // too small
}

}  // namespace
}  // namespace faultline::sys
