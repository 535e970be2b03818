#include "spec/prescan.h"

#include <cstdint>
#include <vector>

namespace faultline::spec::yaml {

// yaml-cpp 0.7 can take unbounded time and memory on some malformed text (found by
// tests/fuzz/fuzz_job_spec: a flow map "memcg: {memory_max: ..." never closed used 1.9 GB and
// did not finish; so did text with NUL bytes, lone carriage returns or bytes that are not
// UTF-8). Such text is
// refused before yaml-cpp sees it: bytes that are not UTF-8, control characters (YAML allows
// neither), flow collections nested deeper than 32, and a '{' or '[' never closed. The scan knows
// quotes, comments and block scalars.

namespace {

// Length of the valid UTF-8 sequence at text[i], or 0 (overlongs, surrogates and values
// above U+10FFFF are invalid too).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

}  // namespace

std::optional<PrescanError> PrescanYaml(std::string_view text) {
  struct Open {
    int line, column;
  };
  std::vector<Open> open;
  bool single_quoted = false, double_quoted = false;
  int block_parent_indent = -1;  // inside a block scalar (| or >) of a key at this indent
  int line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    for (size_t i = 0; i < line.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(line[i]);
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(line, i);
        if (n == 0) {
          YAML::Mark mark;
          mark.line = line_number;
          mark.column = static_cast<int>(i);
          return PrescanError{mark, "invalid YAML: not UTF-8"};
        }
        i += n - 1;
        continue;
      }
      // A carriage return only as part of CR LF (yaml-cpp ran away on lone ones too).
      const bool crlf = c == '\r' && i + 1 == line.size() && end < text.size();
      if ((c < 0x20 && c != '\t' && !crlf) || c == 0x7f) {
        YAML::Mark mark;
        mark.line = line_number;
        mark.column = static_cast<int>(i);
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", c);
        return PrescanError{mark, std::string("invalid YAML: control character ") + hex};
      }
    }
    const size_t indent = line.find_first_not_of(' ');
    const bool blank = indent == std::string_view::npos || line[indent] == '\r';
    if (block_parent_indent >= 0 && (blank || static_cast<int>(indent) > block_parent_indent)) {
      // block scalar content: anything goes
    } else {
      block_parent_indent = -1;
      char last_token = ' ';  // previous non-space character outside quotes
      size_t content_end = line.size();
      for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (double_quoted) {
          if (c == '\\')
            ++i;
          else if (c == '"')
            double_quoted = false;
          continue;
        }
        if (single_quoted) {
          if (c == '\'' && i + 1 < line.size() && line[i + 1] == '\'')
            ++i;
          else if (c == '\'')
            single_quoted = false;
          continue;
        }
        const bool token_start =
            std::string_view(" :,[{-?").find(last_token) != std::string_view::npos;
        if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
          content_end = i;
          break;
        }
        if (c == '"' && token_start)
          double_quoted = true;
        else if (c == '\'' && token_start)
          single_quoted = true;
        else if (c == '{' || c == '[') {
          open.push_back({line_number, static_cast<int>(i)});
          if (open.size() > 32) {
            YAML::Mark mark;
            mark.line = line_number;
            mark.column = static_cast<int>(i);
            return PrescanError{mark, "invalid YAML: flow collections nested deeper than 32"};
          }
        } else if ((c == '}' || c == ']') && !open.empty())
          open.pop_back();
        if (c != ' ' && c != '\t') last_token = c;
      }
      // "key: |" / "key: >-" starts a block scalar on the next lines.
      std::string_view content = line.substr(0, content_end);
      while (!content.empty() &&
             (content.back() == ' ' || content.back() == '\r' || content.back() == '\t')) {
        content.remove_suffix(1);
      }
      while (!content.empty() && (content.back() == '-' || content.back() == '+' ||
                                  std::isdigit(static_cast<unsigned char>(content.back())))) {
        content.remove_suffix(1);
      }
      if (!single_quoted && !double_quoted && open.empty() && !content.empty() &&
          (content.back() == '|' || content.back() == '>') &&
          (content.size() == 1 || content[content.size() - 2] == ' ')) {
        block_parent_indent = indent == std::string_view::npos ? 0 : static_cast<int>(indent);
      }
    }
    ++line_number;
    start = end + 1;
  }
  if (open.empty()) return std::nullopt;
  YAML::Mark mark;
  mark.line = open.back().line;
  mark.column = open.back().column;
  return PrescanError{mark, "invalid YAML: this '{' or '[' is never closed"};
}

}  // namespace faultline::spec::yaml
