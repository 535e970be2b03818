#pragma once
// Job spec files: YAML mapped onto faultline.v1.JobSpec by protobuf reflection, so the
// file format and the RPC are one schema (same field names, same nesting).
//
//   benchmark: filemap-thrash
//   duration: 5s
//   kernels: [vanilla, patched]        # repeated field  <- YAML sequence
//   memcg: {memory_max: 256M}          # message field   <- YAML map
//   params: {file_size: 16M}           # map<string,string> <- YAML map of scalars
//   matrix: {threads: [4, 8], x: 1}    # map<string,ParamValues> <- sequence or one scalar
//
// Scalars go into string fields as written ("0", "16M", "yes"); numeric, bool and enum
// fields are parsed strictly. Every error names the place as
// "<display name>:<line>:<column>: <field path>: <problem>" (1-based line and column).
//
// One special case: `kernels` may also be a map from label to where the kernel comes from
// (JobSpec.kernels gets the labels in file order, JobSpec.kernel_sources the sources):
//
//   kernels:
//     vanilla: {tree: /srv/linux.git, ref: v6.12.117,
//               config: {base: tinyconfig, fragments: [lab.config]}}   # or config: defconfig
//     patched: {from: vanilla, series: [rfc-v5.mbox], include: ["mm/*"]}
//     other: {image: https://example.org/bzImage, sha256: <64 hex>, release: 6.12.0-x}
//     stock: {}                          # or `stock: installed`: a kernel the boards have
//
// `fragments` and `series` are files, relative to the spec file's directory (to the current
// directory for text without a file); their contents go into the spec as SourceFiles named by
// the file's base name, within the limits below.
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "faultline/v1/limits.h"

namespace google::protobuf {
class Message;
}

namespace faultline::spec {

// Reads and parses a spec file. `path` is also the name used in error messages.
absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);

// Parses spec text; `display_name` stands for the file in error messages. Files named by
// `kernels` resolve against the current directory.
absl::StatusOr<v1::JobSpec> LoadJobSpecFromString(std::string_view text,
                                                  std::string_view display_name);

// The generic mapping behind both: fills `message` (any message type) from one YAML
// document. Errors are absl::InvalidArgumentError with line:column.
absl::Status LoadMessageFromYaml(std::string_view text, std::string_view display_name,
                                 google::protobuf::Message* message);

}  // namespace faultline::spec
