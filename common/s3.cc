#include "common/s3.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/http_client.h"
#include "common/sha256.h"

namespace faultline::s3 {
namespace {

struct Stamp {
  std::string date;      // YYYYMMDD
  std::string amz_date;  // YYYYMMDDTHHMMSSZ
};

Stamp StampOf(std::time_t now) {
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[16], full[32];
  std::strftime(date, sizeof(date), "%Y%m%d", &tm);
  std::strftime(full, sizeof(full), "%Y%m%dT%H%M%SZ", &tm);
  return {date, full};
}

std::string SigningKey(const Config& c, const std::string& date) {
  std::string k = HmacSha256("AWS4" + c.secret_key, date);
  k = HmacSha256(k, c.region);
  k = HmacSha256(k, "s3");
  return HmacSha256(k, "aws4_request");
}

// The signature over a canonical request.
std::string Signature(const Config& c, const Stamp& stamp, const std::string& canonical) {
  const std::string scope = absl::StrCat(stamp.date, "/", c.region, "/s3/aws4_request");
  const std::string to_sign =
      absl::StrCat("AWS4-HMAC-SHA256\n", stamp.amz_date, "\n", scope, "\n", Sha256Hex(canonical));
  return LowerHex(HmacSha256(SigningKey(c, stamp.date), to_sign));
}

std::string S3Error(const http_client::Response& r) {
  // <Error><Code>NoSuchBucket</Code>...
  const size_t at = r.body.find("<Code>");
  const size_t end = r.body.find("</Code>");
  if (at == std::string::npos || end == std::string::npos || end < at) return "";
  return r.body.substr(at + 6, end - at - 6);
}

}  // namespace

Signed SignRequest(const Config& config, absl::string_view method, absl::string_view scheme,
                   absl::string_view host, absl::string_view path, absl::string_view body,
                   std::time_t now) {
  Signed out;
  const Stamp stamp = StampOf(now);
  out.amz_date = stamp.amz_date;
  out.payload_sha256 = Sha256Hex(std::string_view(body.data(), body.size()));
  const std::string canonical =
      absl::StrCat(method, "\n", http_client::UriEncode(path, true), "\n\n", "host:", host,
                   "\nx-amz-content-sha256:", out.payload_sha256, "\nx-amz-date:", stamp.amz_date,
                   "\n\nhost;x-amz-content-sha256;x-amz-date\n", out.payload_sha256);
  out.signature = Signature(config, stamp, canonical);
  out.authorization = absl::StrCat(
      "AWS4-HMAC-SHA256 Credential=", config.access_key, "/", stamp.date, "/", config.region,
      "/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=",
      out.signature);
  out.url = absl::StrCat(scheme, "://", host, http_client::UriEncode(path, true));
  return out;
}

Signed Presign(const Config& config, absl::string_view scheme, absl::string_view host,
               absl::string_view path, int expires_seconds, std::time_t now) {
  Signed out;
  const Stamp stamp = StampOf(now);
  out.amz_date = stamp.amz_date;
  out.payload_sha256 = "UNSIGNED-PAYLOAD";
  // Sorted by name, values encoded.
  const std::string query = absl::StrCat(
      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=",
      http_client::UriEncode(
          absl::StrCat(config.access_key, "/", stamp.date, "/", config.region, "/s3/aws4_request"),
          false),
      "&X-Amz-Date=", stamp.amz_date, "&X-Amz-Expires=", expires_seconds,
      "&X-Amz-SignedHeaders=host");
  const std::string encoded_path = http_client::UriEncode(path, true);
  const std::string canonical = absl::StrCat("GET\n", encoded_path, "\n", query, "\nhost:", host,
                                             "\n\nhost\nUNSIGNED-PAYLOAD");
  out.signature = Signature(config, stamp, canonical);
  out.url = absl::StrCat(scheme, "://", host, encoded_path, "?", query,
                         "&X-Amz-Signature=", out.signature);
  return out;
}

absl::Status Client::Check(const Config& c) {
  absl::StatusOr<http_client::Url> url = http_client::ParseUrl(c.endpoint);
  if (!url.ok() || url->target != "/") {
    return absl::InvalidArgumentError(absl::StrCat(
        "s3 endpoint: '", c.endpoint, "' is not an http(s)://host[:port] URL (path-style)"));
  }
  if (c.bucket.empty() || c.bucket.size() > 63 ||
      !std::all_of(c.bucket.begin(), c.bucket.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.';
      })) {
    return absl::InvalidArgumentError(
        "s3 bucket: 1-63 lowercase letters, digits, '-' and '.' are needed");
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    return absl::InvalidArgumentError("s3 credentials: an access key and a secret key are needed");
  }
  if (c.region.empty()) return absl::InvalidArgumentError("s3 region: needed (e.g. us-east-1)");
  return absl::OkStatus();
}

std::string Client::Path(const std::string& name) const {
  return absl::StrCat("/", config_.bucket, "/", config_.prefix, name);
}

// One SigV4-signed request (header style) on `path` of the endpoint.
absl::StatusOr<http_client::Response> Client::SignedRequest(const std::string& method,
                                                            const std::string& path,
                                                            absl::string_view body,
                                                            int timeout_seconds) const {
  absl::StatusOr<http_client::Url> url = http_client::ParseUrl(config_.endpoint);
  if (!url.ok()) return url.status();
  const Signed s =
      SignRequest(config_, method, url->scheme, url->Authority(), path, body, std::time(nullptr));
  http_client::Request r;
  r.method = method;
  r.url = s.url;
  r.ca_file = config_.ca_file;
  r.timeout_seconds = timeout_seconds;
  r.headers = {{"x-amz-date", s.amz_date},
               {"x-amz-content-sha256", s.payload_sha256},
               {"Authorization", s.authorization}};
  if (method == "PUT") r.headers.emplace_back("Content-Type", "application/octet-stream");
  r.body = std::string(body);
  return http_client::Send(r);
}

absl::Status Client::CheckBucket() const {
  absl::StatusOr<http_client::Response> got = SignedRequest("HEAD", "/" + config_.bucket, "", 15);
  if (!got.ok()) {
    return absl::UnavailableError(
        absl::StrCat("s3 ", config_.endpoint, ": ", got.status().message()));
  }
  if (got->status / 100 == 2) return absl::OkStatus();
  const char* why = got->status == 404   ? " (no such bucket)"
                    : got->status == 403 ? " (the credentials are refused)"
                                         : "";
  return absl::FailedPreconditionError(absl::StrCat("s3 ", config_.endpoint, " bucket ",
                                                    config_.bucket, ": HTTP ", got->status, why));
}

absl::Status Client::Put(const std::string& name, absl::string_view data) const {
  absl::StatusOr<http_client::Response> got = SignedRequest("PUT", Path(name), data, 120);
  if (!got.ok()) return got.status();
  if (got->status / 100 != 2) {
    return absl::UnavailableError(
        absl::StrCat("s3 PUT ", Path(name), ": HTTP ", got->status, " ", S3Error(*got)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Client::Size(const std::string& name) const {
  absl::StatusOr<http_client::Response> got = SignedRequest("HEAD", Path(name), "", 60);
  if (!got.ok()) return got.status();
  if (got->status == 404) return absl::NotFoundError(absl::StrCat("s3: no object ", Path(name)));
  if (got->status / 100 != 2) {
    return absl::UnavailableError(absl::StrCat("s3 HEAD ", Path(name), ": HTTP ", got->status));
  }
  uint64_t size = 0;
  auto cl = got->headers.find("content-length");
  if (cl == got->headers.end() || !absl::SimpleAtoi(cl->second, &size)) {
    return absl::UnavailableError(absl::StrCat("s3 HEAD ", Path(name), ": no Content-Length"));
  }
  return size;
}

std::string Client::PresignedGet(const std::string& name, int expires_seconds) const {
  absl::StatusOr<http_client::Url> url = http_client::ParseUrl(config_.endpoint);
  if (!url.ok()) return "";
  return Presign(config_, url->scheme, url->Authority(), Path(name), expires_seconds,
                 std::time(nullptr))
      .url;
}

}  // namespace faultline::s3
