// The object-store client's parts that need no store: SigV4 against AWS's published
// presigned-URL example, URL parsing, and the HTTP client against a tiny in-process server
// answering with a Content-Length, a chunked body, a body cut short and a refusal. The real
// store (Ceph's radosgw) is in tests/integration/s3_radosgw_test.cc.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/http_client.h"
#include "common/s3.h"

namespace faultline {
namespace {

TEST(S3, PresignsAsAwsDocumentsIt) {
  // docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
  s3::Config c;
  c.access_key = "AKIAIOSFODNN7EXAMPLE";
  c.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  c.region = "us-east-1";
  const s3::Signed s =
      s3::Presign(c, "https", "examplebucket.s3.amazonaws.com", "/test.txt", 86400, 1369353600);
  EXPECT_EQ(s.signature, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  EXPECT_EQ(s.url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(S3, ConfigsThatCannotWorkAreNamed) {
  s3::Config c{.endpoint = "http://127.0.0.1:7480",
               .bucket = "kernels",
               .access_key = "a",
               .secret_key = "b"};
  EXPECT_TRUE(s3::Client::Check(c).ok());
  auto bad = [&](auto change) {
    s3::Config x = c;
    change(x);
    return std::string(s3::Client::Check(x).message());
  };
  EXPECT_EQ(bad([](s3::Config& x) { x.endpoint = "ftp://h"; }),
            "s3 endpoint: 'ftp://h' is not an http(s)://host[:port] URL (path-style)");
  EXPECT_EQ(bad([](s3::Config& x) { x.endpoint = "http://h/bucket"; }),
            "s3 endpoint: 'http://h/bucket' is not an http(s)://host[:port] URL (path-style)");
  EXPECT_EQ(bad([](s3::Config& x) { x.bucket = "Kernels"; }),
            "s3 bucket: 1-63 lowercase letters, digits, '-' and '.' are needed");
  EXPECT_EQ(bad([](s3::Config& x) { x.secret_key.clear(); }),
            "s3 credentials: an access key and a secret key are needed");
}

TEST(HttpClient, ParsesUrls) {
  auto u = http_client::ParseUrl("http://127.0.0.1:7480/b/k?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 7480);
  EXPECT_EQ(u->target, "/b/k?x=1");
  EXPECT_EQ(u->Authority(), "127.0.0.1:7480");
  auto s = http_client::ParseUrl("https://s3.example.org");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->port, 443);
  EXPECT_EQ(s->target, "/");
  EXPECT_EQ(s->Authority(), "s3.example.org");
  auto v6 = http_client::ParseUrl("http://[::1]:8080/x");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8080);
  EXPECT_FALSE(http_client::ParseUrl("file:///x").ok());
  EXPECT_FALSE(http_client::ParseUrl("http://u:p@h/").ok());
  EXPECT_FALSE(http_client::ParseUrl("http://h:99999/").ok());
  EXPECT_EQ(http_client::UriEncode("a b/c~", true), "a%20b/c~");
  EXPECT_EQ(http_client::UriEncode("a/b", false), "a%2Fb");
}

// Serves one canned response per connection, in order, on a free port.
class CannedServer {
 public:
  explicit CannedServer(std::vector<std::string> responses) : responses_(std::move(responses)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(::listen(fd_, 8), 0);
    thread_ = std::thread([this] {
      for (const std::string& response : responses_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string request;
        char buf[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
          if (n <= 0) break;
          request.append(buf, static_cast<size_t>(n));
        }
        requests_.push_back(request);
        ::send(c, response.data(), response.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~CannedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<std::string> requests_;

 private:
  std::vector<std::string> responses_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpClient, ReadsSizedAndChunkedBodiesAndSaysWhenOneIsCutShort) {
  std::string streamed;
  {
    CannedServer server({"HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\n\r\nhello",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
                         "2;x=y\r\nde\r\n0\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                         "HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\ndenied!"});
    http_client::Request r;
    r.url = server.Url("/k");
    r.headers = {{"Range", "bytes=5-"}};
    auto sized = http_client::Send(r, [&](absl::string_view d) {
      streamed.append(d.data(), d.size());
      return absl::OkStatus();
    });
    ASSERT_TRUE(sized.ok()) << sized.status();
    EXPECT_EQ(sized->status, 206);
    EXPECT_EQ(streamed, "hello");
    EXPECT_TRUE(sized->body.empty()) << "streamed to the sink";
    r.headers.clear();
    auto chunked = http_client::Send(r);
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    EXPECT_EQ(chunked->body, "abcde");
    auto cut = http_client::Send(r);
    EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss) << cut.status();
    EXPECT_NE(cut.status().message().find("cut short at 5 of 10 bytes"), std::string::npos);
    std::string not_streamed;
    auto refused = http_client::Send(r, [&](absl::string_view d) {
      not_streamed.append(d.data(), d.size());
      return absl::OkStatus();
    });
    ASSERT_TRUE(refused.ok());
    EXPECT_EQ(refused->status, 403);
    EXPECT_EQ(refused->body, "denied!") << "an error's body is kept, not streamed";
    EXPECT_TRUE(not_streamed.empty());
    ASSERT_EQ(server.requests_.size(), 4u);
    EXPECT_NE(server.requests_[0].find("GET /k HTTP/1.1\r\nHost: 127.0.0.1:"), std::string::npos);
    EXPECT_NE(server.requests_[0].find("\r\nRange: bytes=5-\r\n"), std::string::npos);
  }
  // Nobody listening: UNAVAILABLE naming where.
  auto nowhere = http_client::Send({.url = "http://127.0.0.1:1/x", .timeout_seconds = 5});
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(nowhere.status().message().find("cannot connect to 127.0.0.1:1"), std::string::npos)
      << nowhere.status();
}

}  // namespace
}  // namespace faultline
