#pragma once
// A minimal streaming JSON writer for the one object faultline-workload prints. Hand-written
// so the workload stays free of third-party libraries (it cross-builds for boards).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::workloads {

// Quotes and escapes `text` as a JSON string. Control characters become \uXXXX (or the
// short forms), and bytes that are not valid UTF-8 become U+FFFD, because protobuf's JSON
// parser rejects invalid UTF-8 and a file path or error message may contain anything.
std::string JsonQuote(std::string_view text);

// Shortest text that reads back as the same double; non-finite values (not representable
// in JSON) are written as 0.
std::string JsonNumber(double value);

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);

  const std::string& text() const { return out_; }

 private:
  void BeforeValue();

  std::string out_;
  // One entry per open object/array: whether it already has an element (comma needed).
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace faultline::workloads
