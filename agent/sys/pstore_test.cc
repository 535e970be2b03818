// PreviousBootLog: the newest console record first, else the newest kernel log, its tail,
// printable.
#include "agent/sys/pstore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline::sys {
namespace {
namespace fs = std::filesystem;

class PstoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (fs::temp_directory_path() / ("faultline-pstore-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Put(const std::string& name, const std::string& text,
           fs::file_time_type::duration age = {}) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
    fs::last_write_time(dir_ + "/" + name, fs::file_time_type::clock::now() - age);
  }
  std::string dir_;
};

TEST_F(PstoreTest, NothingKeptIsEmpty) {
  EXPECT_EQ(PreviousBootLog(dir_), "");
  EXPECT_EQ(PreviousBootLog(dir_ + "/missing"), "");
  Put("unrelated", "x");
  EXPECT_EQ(PreviousBootLog(dir_), "");
}

TEST_F(PstoreTest, TheConsoleBeforeTheLogTheNewestRecordItsTailPrintable) {
  Put("dmesg-ramoops-0", "Oops: kernel log\n");
  EXPECT_EQ(PreviousBootLog(dir_), "Oops: kernel log\n");
  Put("console-ramoops-0", "old console\n", std::chrono::hours(1));
  Put("console-ramoops-1", "[    1.0] virtio_blk: hang\x01\xff\n");
  EXPECT_EQ(PreviousBootLog(dir_), "[    1.0] virtio_blk: hang??\n");
  EXPECT_EQ(PreviousBootLog(dir_, 6), "ang??\n");
}

}  // namespace
}  // namespace faultline::sys
