#pragma once
// Which posted series the robot tests: a path filter (a series touching any file a glob
// selects), or an opt-in tag in the cover letter (or the lone patch), each named in the
// robot's config. A series outside both gets nothing, not even a note. Pure.
#include <string>
#include <vector>

#include "robot/series.h"

namespace faultline::robot {

struct Choice {
  bool chosen = false;
  // Why, in one line: "touches mm/memory.c", "opted in (Faultline-Test: yes)", "touches no
  // file of mm/*, include/linux/mm*", "incomplete: 2 of 5 patches", "a reply".
  std::string reason;
};

struct ChooseRules {
  std::vector<std::string> paths = {"mm/*", "include/linux/mm*", "arch/*/mm/*"};
  // A line "Faultline-Test: yes" (the tag, then ": yes") in the cover letter or the lone
  // patch's message opts a series in whatever it touches.
  std::string opt_in_tag = "Faultline-Test";
};

Choice Choose(const Series& series, const ChooseRules& rules);

}  // namespace faultline::robot
