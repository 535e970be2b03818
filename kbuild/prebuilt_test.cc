// Prebuilt kernels (prebuilt.h): what an image says of itself, and the fetch into the cache
// with its checks, on small images made here with the real headers' magic at the real
// offsets. curl does the fetching (file:// URLs here; the e2e test serves one over HTTP).
#include "kbuild/prebuilt.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/sha256.h"

namespace faultline::kbuild {
namespace {
namespace fs = std::filesystem;

void Put(std::string& b, size_t at, const std::string& text) {
  if (b.size() < at + text.size()) b.resize(at + text.size(), '\0');
  b.replace(at, text.size(), text);
}

// An x86 bzImage header: "HdrS" at 0x202, kernel_version (offset - 0x200) at 0x20e.
std::string X86Image(const std::string& release) {
  std::string b(0x1000, '\0');
  Put(b, 0x202, "HdrS");
  b[0x20e] = 0x00;
  b[0x20f] = 0x01;  // the string at 0x300
  Put(b, 0x300, release + " (faultline@faultline) #1 SMP");
  return b;
}

// An arm64 Image: "ARM\x64" at 0x38, a printk format and then the banner in its data.
std::string Arm64Image(const std::string& release) {
  std::string b(0x2000, '\0');
  Put(b, 0x38, std::string("ARM\x64", 4));
  Put(b, 0x800, "Linux version %s");
  Put(b, 0x900, "Linux version " + release + " (faultline@faultline) (gcc 12.2.0) #1 SMP");
  return b;
}

std::string RiscvImage() {
  std::string b(0x1000, '\0');
  Put(b, 0x30, std::string("RISCV\0\0\0", 8));
  Put(b, 0x38, std::string("RSC\x05", 4));
  return b;
}

class PrebuiltTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("faultline-prebuilt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/served");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The image served as file:///...; returns its sha256.
  std::string Serve(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ + "/served/" + name, std::ios::binary) << bytes;
    return Sha256Hex(bytes);
  }
  std::string Url(const std::string& name) { return "file://" + dir_ + "/served/" + name; }
  std::string Cache() { return dir_ + "/cache"; }
  size_t CachedImages() {
    size_t n = 0;
    if (fs::exists(Cache() + "/images")) {
      for ([[maybe_unused]] const auto& e : fs::directory_iterator(Cache() + "/images")) ++n;
    }
    return n;
  }

  std::string dir_;
};

TEST_F(PrebuiltTest, ImagesSayTheirArchAndRelease) {
  Serve("bzImage", X86Image("6.12.0-pre"));
  Serve("Image", Arm64Image("6.12.0-arm"));
  Serve("riscv", RiscvImage());
  auto x86 = InspectImage(dir_ + "/served/bzImage");
  ASSERT_TRUE(x86.ok()) << x86.status();
  EXPECT_EQ(x86->arch, "x86_64");
  EXPECT_EQ(x86->release, "6.12.0-pre");
  auto arm = InspectImage(dir_ + "/served/Image");
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->arch, "aarch64");
  EXPECT_EQ(arm->release, "6.12.0-arm");  // the banner, not the printk format before it
  auto rv = InspectImage(dir_ + "/served/riscv");
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(rv->arch, "riscv64");
  EXPECT_EQ(rv->release, "");
  Serve("Image.gz", std::string("\x1f\x8b\x08\x00", 4) + std::string(100, 'x'));
  Serve("vmlinux", std::string("\x7f"
                               "ELF",
                               4) +
                       std::string(100, 'x'));
  EXPECT_EQ(InspectImage(dir_ + "/served/Image.gz").status().message(),
            "image: not a boot image faultline knows (x86 bzImage, arm64 or riscv Image): gzip "
            "data (an Image.gz: give the Image)");
  EXPECT_EQ(InspectImage(dir_ + "/served/vmlinux").status().message(),
            "image: not a boot image faultline knows (x86 bzImage, arm64 or riscv Image): an "
            "ELF file (a vmlinux, not a boot image)");
}

TEST_F(PrebuiltTest, FetchedOnceVerifiedAndKeptByItsSha256) {
  const std::string sha = Serve("bzImage", X86Image("6.12.0-pre"));
  std::vector<std::string> said;
  auto got = FetchImage(Cache(), {Url("bzImage"), sha, "x86_64", ""},
                        [&](const std::string& line) { said.push_back(line); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->cached);
  EXPECT_EQ(got->key, sha);
  EXPECT_EQ(got->image_sha256, sha);
  EXPECT_EQ(got->image_bytes, 0x1000u);
  EXPECT_EQ(got->release, "6.12.0-pre");
  EXPECT_EQ(got->dir, Cache() + "/images/" + sha);
  EXPECT_TRUE(fs::exists(got->image));
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "fetch " + Url("bzImage"));
  // Again: from the cache, even with the source gone.
  fs::remove(dir_ + "/served/bzImage");
  auto again = FetchImage(Cache(), {Url("bzImage"), sha, "x86_64", "6.12.0-pre"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->image, got->image);
  // A damaged cached copy is fetched again (and here, its source gone, not found).
  std::ofstream(got->image, std::ios::binary | std::ios::app) << "x";
  auto damaged = FetchImage(Cache(), {Url("bzImage"), sha, "x86_64", ""});
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kUnavailable) << damaged.status();
  EXPECT_EQ(CachedImages(), 0u);
}

TEST_F(PrebuiltTest, WrongImagesAreRefusedAndNothingIsKept) {
  const std::string x86 = Serve("bzImage", X86Image("6.12.0-pre"));
  const std::string arm = Serve("Image", Arm64Image("6.12.0-arm"));
  const std::string rv = Serve("riscv", RiscvImage());
  const std::string other(64, 'a');
  auto message = [&](const PrebuiltRequest& r) {
    auto got = FetchImage(Cache(), r);
    EXPECT_FALSE(got.ok());
    return std::string(got.status().message());
  };
  EXPECT_EQ(message({Url("bzImage"), other, "x86_64", ""}),
            "image: the sha256 of " + Url("bzImage") + " is " + x86 + ", the job says " + other);
  EXPECT_EQ(message({Url("Image"), arm, "x86_64", ""}),
            "image: " + Url("Image") + " is an arm64 Image, the job says x86_64");
  EXPECT_EQ(message({Url("bzImage"), x86, "x86_64", "6.12.0-other"}),
            "image: its release is 6.12.0-pre, the job says 6.12.0-other");
  EXPECT_EQ(message({Url("riscv"), rv, "riscv64", ""}),
            "image: the riscv Image does not say its release: give `release` (its uname -r)");
  PrebuiltRequest small{Url("bzImage"), x86, "x86_64", ""};
  small.max_bytes = 100;
  // (curl stops an HTTP transfer at the limit; a file:// one is checked after it)
  EXPECT_EQ(message(small),
            "image: " + Url("bzImage") + " is 4096 bytes, over the limit of 100 bytes");
  EXPECT_EQ(message({"ftp://example.org/x", x86, "x86_64", ""}),
            "image: 'ftp://example.org/x' is not an http://, https:// or file:/// URL");
  EXPECT_EQ(message({Url("bzImage"), "XYZ", "x86_64", ""}),
            "image: sha256 must be 64 lowercase hex characters");
  auto missing = FetchImage(Cache(), {Url("nothing"), x86, "x86_64", ""});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("curl exit 37"), std::string::npos) << missing.status();
  EXPECT_EQ(CachedImages(), 0u);
  // With its release given, the riscv Image is taken.
  auto taken = FetchImage(Cache(), {Url("riscv"), rv, "riscv64", "6.12.0-rv"});
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->release, "6.12.0-rv");
  EXPECT_EQ(CachedImages(), 1u);
}

}  // namespace
}  // namespace faultline::kbuild
