#pragma once
// Objects in an S3-compatible store (AWS S3, Ceph's radosgw, MinIO...) with Signature V4:
// the controller puts kernel images there and hands boards presigned URLs to fetch them
// (boards need no credentials, and still verify every byte by sha256).
#include <cstdint>
#include <ctime>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "common/http_client.h"

namespace faultline::s3 {

struct Config {
  std::string endpoint;  // http(s)://host[:port], path-style requests
  std::string bucket;
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string prefix = "faultline/kernels/";  // object keys: prefix + sha256
  std::string ca_file;                        // https: trust these CAs
};

// The signature (hex) and the headers or query of a SigV4-signed request: exposed for the
// tests against AWS's published examples.
struct Signed {
  std::string url;             // presigned: with the X-Amz-* query; otherwise as given
  std::string authorization;   // header requests
  std::string amz_date;        // x-amz-date
  std::string payload_sha256;  // x-amz-content-sha256
  std::string signature;
};

// SigV4 for a request on `host` (the Host header's value), `path` (not yet encoded) and
// `body`, at `now`. Header style: Authorization with host, x-amz-content-sha256 and
// x-amz-date signed.
Signed SignRequest(const Config& config, absl::string_view method, absl::string_view scheme,
                   absl::string_view host, absl::string_view path, absl::string_view body,
                   std::time_t now);
// Query style (a presigned GET valid for `expires_seconds`, host signed, payload unsigned).
Signed Presign(const Config& config, absl::string_view scheme, absl::string_view host,
               absl::string_view path, int expires_seconds, std::time_t now);

class Client {
 public:
  explicit Client(Config config) : config_(std::move(config)) {}
  // INVALID_ARGUMENT naming the field for a config that cannot work (no endpoint, bucket,
  // keys; not http(s)).
  static absl::Status Check(const Config& config);

  // HEAD on the bucket: OK when it exists and the credentials may use it; otherwise an
  // error naming the endpoint, the bucket and the HTTP status (403: the keys, 404: the
  // bucket).
  absl::Status CheckBucket() const;
  // PUT prefix+name; errors name the status and the store's error code.
  absl::Status Put(const std::string& name, absl::string_view data) const;
  // HEAD prefix+name: its size, NOT_FOUND when absent.
  absl::StatusOr<uint64_t> Size(const std::string& name) const;
  // A URL that GETs prefix+name without credentials until `expires_seconds` from now.
  std::string PresignedGet(const std::string& name, int expires_seconds) const;
  const Config& config() const { return config_; }

 private:
  std::string Path(const std::string& name) const;
  absl::StatusOr<http_client::Response> SignedRequest(const std::string& method,
                                                      const std::string& path,
                                                      absl::string_view body,
                                                      int timeout_seconds) const;
  Config config_;
};

}  // namespace faultline::s3
