#include "services/controller/http/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace faultline::controller {
namespace {

void AppendEscaped(std::string* out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendLabel(std::string* out, bool* first, const Label& l) {
  out->push_back(*first ? '{' : ',');
  *first = false;
  out->append(l.first);
  out->append("=\"");
  AppendEscaped(out, l.second);
  out->push_back('"');
}

void AppendValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
    out->append(buf, ec == std::errc() ? end : buf);
  }
}

}  // namespace

void AppendSample(std::string* out, std::string_view metric, const std::vector<Label>& labels,
                  double value, std::initializer_list<Label> extra) {
  out->append(metric);
  // Sorted by name, as prometheus-cpp wrote them: scripts and people grep for these lines.
  std::vector<const Label*> sorted;
  sorted.reserve(labels.size() + extra.size());
  for (const Label& l : labels) sorted.push_back(&l);
  for (const Label& l : extra) sorted.push_back(&l);
  std::sort(sorted.begin(), sorted.end(),
            [](const Label* a, const Label* b) { return a->first < b->first; });
  bool first = true;
  for (const Label* l : sorted) AppendLabel(out, &first, *l);
  if (!first) out->push_back('}');
  out->push_back(' ');
  AppendValue(out, value);
  out->push_back('\n');
}

void TextFamily::WriteTo(std::string* out) const {
  WriteHeaderTo(out);
  out->append(samples_);
}

void TextFamily::WriteHeaderTo(std::string* out) const {
  out->append("# HELP ").append(name_).push_back(' ');
  for (char c : help_) {  // HELP escapes \\ and \n only
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
  out->append("\n# TYPE ").append(name_).push_back(' ');
  out->append(type_).push_back('\n');
}

}  // namespace faultline::controller
