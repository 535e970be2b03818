#pragma once
// A job's spec written back as a spec file (spec_file.h's format), so a report can say how
// to run the study again: `faultline submit study.yaml`.
//
// Fields in the proto's order, only those set. Kernels a job brought go back under their
// own labels ("patched@7078d7b1b59f" -> patched, a schedule's slot dropped too), as the
// `kernels:` map with their sources; where the job's build of a label is known, its ref is
// the commit that was built (the ref asked for in a comment), so the study runs the same
// trees again. Config fragments and series are named by file, as the job stored them (their
// contents are not kept with the job). Every line fits `width` columns: a longer scalar is
// written double-quoted with escaped line breaks (YAML folds them back into one string).
#include <string>
#include <vector>

#include "faultline/v1/job.pb.h"

namespace faultline::spec {

std::string SpecToYaml(const v1::JobSpec& spec, const std::vector<v1::Build>& builds = {},
                       size_t width = 80);

// "patched@7078d7b1b59f+20261203T0200" -> "patched": the label a spec file gives.
std::string SpecLabel(const std::string& label);

}  // namespace faultline::spec
