#include "robot/choose.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kbuild/series.h"

namespace faultline::robot {
namespace {

bool OptedIn(const Series& series, const std::string& tag) {
  if (tag.empty()) return false;
  const Mail* notes = series.cover
                          ? &*series.cover
                          : (series.patches.empty() ? nullptr : &series.patches.begin()->second);
  if (notes == nullptr) return false;
  for (absl::string_view line : absl::StrSplit(notes->body, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.size() <= tag.size() || !absl::StartsWithIgnoreCase(line, tag) ||
        line[tag.size()] != ':') {
      continue;
    }
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(tag.size() + 1)), "yes")) {
      return true;
    }
  }
  return false;
}

}  // namespace

Choice Choose(const Series& series, const ChooseRules& rules) {
  if (!series.complete()) {
    return {false,
            absl::StrCat("incomplete: ", series.patches.size(), " of ", series.total, " patches")};
  }
  if (OptedIn(series, rules.opt_in_tag)) {
    return {true, absl::StrCat("opted in (", rules.opt_in_tag, ": yes)")};
  }
  for (const std::string& file : series.TouchedFiles()) {
    for (const std::string& glob : rules.paths) {
      if (kbuild::GlobMatches(glob, file)) return {true, absl::StrCat("touches ", file)};
    }
  }
  return {false, absl::StrCat("touches no file of ", absl::StrJoin(rules.paths, ", "))};
}

}  // namespace faultline::robot
