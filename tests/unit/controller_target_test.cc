// ControllerTarget: one --controller value, or a list of controllers as one gRPC target.
#include <gtest/gtest.h>

#include "common/tls.h"

namespace faultline {
namespace {

TEST(ControllerTarget, OneAddressIsUsedAsGiven) {
  EXPECT_EQ(*ControllerTarget("controller.lab:7000"), "controller.lab:7000");
  EXPECT_EQ(*ControllerTarget("127.0.0.1:7000"), "127.0.0.1:7000");
}

TEST(ControllerTarget, SeveralAddressesBecomeOneChannelOverAll) {
  EXPECT_EQ(*ControllerTarget("10.0.0.1:7000,10.0.0.2:7001"), "ipv4:10.0.0.1:7000,10.0.0.2:7001");
  EXPECT_EQ(*ControllerTarget("10.0.0.1:7000, 10.0.0.2:7001"), "ipv4:10.0.0.1:7000,10.0.0.2:7001");
  EXPECT_EQ(*ControllerTarget("[::1]:7000,[fd00::2]:7000"), "ipv6:[::1]:7000,[fd00::2]:7000");
}

TEST(ControllerTarget, AListNamesTheEntryThatIsNotIpAndPort) {
  for (const char* bad : {"a.lab:7000,b.lab:7000", "10.0.0.1:7000,10.0.0.2", "10.0.0.1:x,1.2.3.4:1",
                          "10.0.0.1:7000,", "[::1]:7000,10.0.0.1:7000"}) {
    auto target = ControllerTarget(bad);
    ASSERT_FALSE(target.ok()) << bad;
    EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(target.status().message()).find("controller"), std::string::npos);
  }
  EXPECT_NE(std::string(ControllerTarget("a.lab:7000,b.lab:7000").status().message())
                .find("'a.lab:7000'"),
            std::string::npos);
}

TEST(TlsServerName, AListIsCheckedAgainstItsFirstHostUnlessANameIsGiven) {
  EXPECT_EQ(TlsServerName("controller.lab:7000", ""), "");  // gRPC checks controller.lab
  EXPECT_EQ(TlsServerName("10.0.0.1:7000,10.0.0.2:7001", ""), "10.0.0.1");
  EXPECT_EQ(TlsServerName(" 10.0.0.1:7000 , 10.0.0.2:7001", ""), "10.0.0.1");
  EXPECT_EQ(TlsServerName("[fd00::1]:7000,[fd00::2]:7000", ""), "fd00::1");
  EXPECT_EQ(TlsServerName("10.0.0.1:7000,10.0.0.2:7001", "controller.lab"), "controller.lab");
  EXPECT_EQ(TlsServerName("10.0.0.1:7000", "controller.lab"), "controller.lab");
}

}  // namespace
}  // namespace faultline
