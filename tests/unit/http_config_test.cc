// --http-config: the exporter-toolkit web config subset (what is accepted, what is refused by
// name), bcrypt hashes and the basic auth check.
#include "services/controller/http/http_config.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"

namespace faultline::controller {
namespace {

std::string Basic(const std::string& user_password) {
  return "Basic " + absl::Base64Escape(user_password);
}

TEST(HttpWebConfig, TlsAndUsersWithPathsRelativeToTheFile) {
  const std::string hash = *BcryptHash("pw", 4);
  auto c = ParseHttpWebConfig(R"(
tls_server_config:
  cert_file: server.pem
  key_file: /etc/keys/server.key
  client_ca_file: ca.pem
  min_version: TLS13
basic_auth_users:
  prometheus: ')" + hash + "'\n",
                              "/etc/faultline");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cert_file, "/etc/faultline/server.pem");
  EXPECT_EQ(c->key_file, "/etc/keys/server.key");
  EXPECT_EQ(c->client_ca_file, "/etc/faultline/ca.pem");
  EXPECT_EQ(c->client_auth_type, "RequireAndVerifyClientCert");  // a CA alone: required
  EXPECT_EQ(c->min_version, "TLS13");
  EXPECT_EQ(c->basic_auth_users.at("prometheus"), hash);
  HttpServerOptions o;
  ApplyHttpWebConfig(*c, &o);
  EXPECT_EQ(o.tls_cert_file, "/etc/faultline/server.pem");
  EXPECT_TRUE(o.tls_require_client_cert);
  EXPECT_TRUE(o.tls13_only);
  ASSERT_TRUE(o.authenticator);
  EXPECT_TRUE(o.authenticator(Basic("prometheus:pw")));
  EXPECT_FALSE(o.authenticator(Basic("prometheus:nope")));
}

TEST(HttpWebConfig, EmptyFileIsNeitherTlsNorAuth) {
  auto c = ParseHttpWebConfig("", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cert_file.empty());
  EXPECT_TRUE(c->basic_auth_users.empty());
  HttpServerOptions o;
  ApplyHttpWebConfig(*c, &o);
  EXPECT_FALSE(o.authenticator);
}

TEST(HttpWebConfig, WhatIsNotServedIsRefusedByName) {
  auto error_of = [](const std::string& text) {
    auto c = ParseHttpWebConfig(text, ".");
    return c.ok() ? std::string("accepted") : std::string(c.status().message());
  };
  EXPECT_NE(error_of("http_server_config: {http2: false}\n")
                .find("'http_server_config' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config: {cert_file: a, key_file: b, cipher_suites: [x]}\n")
                .find("'cipher_suites' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config: {cert_file: a}\n").find("needs cert_file and key_file"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config: {cert_file: a, key_file: b, client_auth_type: "
                     "RequireAndVerifyClientCert}\n")
                .find("needs client_ca_file"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config: {cert_file: a, key_file: b, client_auth_type: Maybe}\n")
                .find("'Maybe' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config: {cert_file: a, key_file: b, min_version: TLS10}\n")
                .find("TLS12 or TLS13"),
            std::string::npos);
  // A plaintext password where a bcrypt hash belongs: refused, the password not repeated.
  std::string e = error_of("basic_auth_users: {alice: hunter2}\n");
  EXPECT_NE(e.find("'alice' is not a bcrypt hash"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos);
  EXPECT_NE(error_of("basic_auth_users: [alice]\n").find("mapping"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]\n").find("mapping"), std::string::npos);
  EXPECT_NE(error_of("{unclosed: \n").find("not YAML"), std::string::npos);
}

TEST(Bcrypt, HashesAndMatches) {
  auto hash = BcryptHash("correct horse", 4);
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(hash->rfind("$2b$04$", 0), 0u);
  EXPECT_EQ(hash->size(), 60u);
  EXPECT_TRUE(BcryptMatches("correct horse", *hash));
  EXPECT_FALSE(BcryptMatches("correct horsE", *hash));
  EXPECT_FALSE(BcryptMatches("", *hash));
  EXPECT_FALSE(BcryptMatches("correct horse", "not a hash"));
  EXPECT_FALSE(BcryptMatches(std::string("correct horse\0x", 15), *hash));
  EXPECT_NE(*BcryptHash("correct horse", 4), *hash);  // salted
}

TEST(BasicAuthChecker, AcceptsOnlyTheRightUserAndPassword) {
  BasicAuthChecker auth({{"alice", *BcryptHash("pa:ss", 4)}, {"bob", *BcryptHash("x", 4)}});
  EXPECT_TRUE(auth.Check(Basic("alice:pa:ss")));  // the password may hold colons
  EXPECT_TRUE(auth.Check(Basic("alice:pa:ss")));  // again: remembered
  EXPECT_TRUE(auth.Check("basic " + absl::Base64Escape("alice:pa:ss")));  // scheme: any case
  EXPECT_FALSE(auth.Check(Basic("alice:pa:sS")));
  EXPECT_FALSE(auth.Check(Basic("bob:pa:ss")));  // another user's password
  EXPECT_FALSE(auth.Check(Basic("carol:x")));    // no such user
  EXPECT_FALSE(auth.Check(Basic("alice")));      // no colon
  EXPECT_FALSE(auth.Check("Basic !!!"));         // not base64
  EXPECT_FALSE(auth.Check("Bearer " + absl::Base64Escape("alice:pa:ss")));
  EXPECT_FALSE(auth.Check("Basic"));
  EXPECT_FALSE(auth.Check(""));
}

}  // namespace
}  // namespace faultline::controller
