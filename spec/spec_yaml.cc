#include "spec/spec_yaml.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <charconv>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernel_label.h"
#include "faultline/v1/values.h"

namespace faultline::spec {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// A plain YAML scalar unless it could be read as something else or breaks the syntax.
bool NeedsQuotes(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return true;
  if (s.find_first_of(":#{}[],&*!|>'\"%@`\n\\") != std::string::npos) return true;
  if (s.front() == '-' || s.front() == '?') return true;
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}) {
    if (s == word) return true;
  }
  return false;
}

std::string DoubleQuoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string Scalar(const std::string& s) {
  return NeedsQuotes(s) ? DoubleQuoted(s) : s;
}

// "KEY: VALUE" at `indent`, the value double-quoted and broken with escaped line breaks
// where the line would be wider than `width` (`\` at a line's end joins it to the next
// with nothing between; the continuation's leading spaces are not part of the string).
void AppendKeyValue(std::string* out, int indent, const std::string& key, const std::string& value,
                    bool quoted_scalar, size_t width) {
  const std::string head = std::string(indent, ' ') + key + ": ";
  const std::string text = quoted_scalar ? Scalar(value) : value;
  if (!quoted_scalar || head.size() + text.size() <= width) {
    absl::StrAppend(out, head, text, "\n");
    return;
  }
  const std::string quoted = DoubleQuoted(value);
  const std::string cont(indent + 2, ' ');
  std::string line = head;
  size_t i = 0;
  while (i < quoted.size()) {
    // Room for at least one character and the trailing backslash; never split an escape.
    size_t room = width > line.size() + 1 ? width - line.size() - 1 : 1;
    size_t take = std::min(room, quoted.size() - i);
    if (i + take < quoted.size() && take > 1 && quoted[i + take - 1] == '\\') --take;
    // A continuation must not start with a space (it would be dropped): move it back.
    while (i + take < quoted.size() && take > 1 && quoted[i + take] == ' ') --take;
    line += quoted.substr(i, take);
    i += take;
    if (i < quoted.size()) {
      absl::StrAppend(out, line, "\\\n");
      line = cont;
    }
  }
  absl::StrAppend(out, line, "\n");
}

std::string Number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : absl::StrCat(v);
}

std::string ScalarOf(const Message& m, const FieldDescriptor* f, int index) {
  const auto* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Number(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Number(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

std::string FlowList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& i : items) quoted.push_back(Scalar(i));
  return "[" + absl::StrJoin(quoted, ", ") + "]";
}

void AppendMessage(std::string* out, const Message& m, int indent, size_t width,
                   const std::map<std::string, std::string>& rename);

// A map field (entries are messages with key and value) as a block mapping, sorted by key.
void AppendMap(std::string* out, const Message& m, const FieldDescriptor* f, int indent,
               size_t width, const std::map<std::string, std::string>& rename) {
  const auto* r = m.GetReflection();
  std::map<std::string, const Message*> entries;
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& e = r->GetRepeatedMessage(m, f, i);
    const FieldDescriptor* k = e.GetDescriptor()->FindFieldByName("key");
    std::string key = ScalarOf(e, k, 0);
    if (auto it = rename.find(key); it != rename.end()) key = it->second;
    entries[key] = &e;
  }
  absl::StrAppend(out, std::string(indent, ' '), f->name(), ":\n");
  for (const auto& [key, e] : entries) {
    const FieldDescriptor* v = e->GetDescriptor()->FindFieldByName("value");
    if (v->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      AppendKeyValue(out, indent + 2, Scalar(key), ScalarOf(*e, v, 0), true, width);
      continue;
    }
    const Message& value = e->GetReflection()->GetMessage(*e, v);
    // ParamValues: `knob: [a, b]`.
    if (const auto* values = value.GetDescriptor()->FindFieldByName("values");
        values != nullptr && value.GetDescriptor()->field_count() == 1) {
      std::vector<std::string> items;
      for (int i = 0; i < value.GetReflection()->FieldSize(value, values); ++i) {
        items.push_back(ScalarOf(value, values, i));
      }
      AppendKeyValue(out, indent + 2, Scalar(key), FlowList(items), false, width);
      continue;
    }
    absl::StrAppend(out, std::string(indent + 2, ' '), Scalar(key), ":\n");
    AppendMessage(out, value, indent + 4, width, {});
  }
}

void AppendMessage(std::string* out, const Message& m, int indent, size_t width,
                   const std::map<std::string, std::string>& rename) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      if (r->FieldSize(m, f) > 0) AppendMap(out, m, f, indent, width, rename);
      continue;
    }
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      if (n == 0) continue;
      std::vector<std::string> items;
      for (int k = 0; k < n; ++k) items.push_back(ScalarOf(m, f, k));
      AppendKeyValue(out, indent, f->name(), FlowList(items), false, width);
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!r->HasField(m, f)) continue;
      std::string inner;
      AppendMessage(&inner, r->GetMessage(m, f), indent + 2, width, {});
      if (!inner.empty()) absl::StrAppend(out, std::string(indent, ' '), f->name(), ":\n", inner);
      continue;
    }
    if (!r->HasField(m, f)) continue;  // proto3 scalars: set means not the default
    std::string value = ScalarOf(m, f, 0);
    if (auto it = rename.find(value); it != rename.end() && f->name() == "baseline") {
      value = it->second;
    }
    AppendKeyValue(out, indent, f->name(), value, f->cpp_type() == FieldDescriptor::CPPTYPE_STRING,
                   width);
  }
}

std::vector<std::string> Names(const google::protobuf::RepeatedPtrField<v1::SourceFile>& files) {
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.name());
  return names;
}

// One kernel of the `kernels:` map: `label: {}` for one the boards have, its source else.
void AppendKernel(std::string* out, const std::string& label, const v1::KernelSource* source,
                  const std::string& built_commit, size_t width) {
  if (source == nullptr) {
    absl::StrAppend(out, "  ", Scalar(label), ": {}\n");
    return;
  }
  absl::StrAppend(out, "  ", Scalar(label), ":\n");
  auto kv = [&](const std::string& key, const std::string& value) {
    if (!value.empty()) AppendKeyValue(out, 4, key, value, true, width);
  };
  auto list = [&](const std::string& key, const std::vector<std::string>& items) {
    if (!items.empty()) AppendKeyValue(out, 4, key, FlowList(items), false, width);
  };
  if (!source->image().empty()) {
    kv("image", source->image());
    kv("sha256", source->image_sha256());
    kv("arch", source->image_arch());
    kv("release", source->image_release());
    return;
  }
  kv("tree", source->tree());
  if (!built_commit.empty() && built_commit != source->ref()) {
    // The commit that was built; what was asked for beside it (a comment, when it fits).
    std::string line = absl::StrCat("    ref: ", built_commit);
    const std::string comment = absl::StrCat("  # ", source->ref());
    if (line.size() + comment.size() <= width) line += comment;
    absl::StrAppend(out, line, "\n");
  } else {
    kv("ref", source->ref());
  }
  if (!source->config_base().empty() || !source->fragments().empty()) {
    absl::StrAppend(out, "    config:\n");
    AppendKeyValue(out, 6, "base", source->config_base(), true, width);
    if (!source->fragments().empty()) {
      AppendKeyValue(out, 6, "fragments", FlowList(Names(source->fragments())), false, width);
    }
  }
  list("series", Names(source->series()));
  list("include", {source->include().begin(), source->include().end()});
  list("revert", {source->revert().begin(), source->revert().end()});
}

}  // namespace

std::string SpecLabel(const std::string& label) {
  return KernelLabel::Parse(label).name;
}

std::string SpecToYaml(const v1::JobSpec& spec, const std::vector<v1::Build>& builds,
                       size_t width) {
  // The labels as a spec file names them (a job's unique names lose their hash).
  std::map<std::string, std::string> rename;
  for (const auto& k : spec.kernels()) {
    if (SpecLabel(k) != k) rename[k] = SpecLabel(k);
  }
  v1::JobSpec rest = spec;
  rest.clear_kernels();
  rest.clear_kernel_sources();
  std::string out;
  // The name first, as people write spec files.
  if (!rest.name().empty()) AppendKeyValue(&out, 0, "name", rest.name(), true, width);
  rest.clear_name();
  // The fields before `kernels` in the proto's order, then kernels, then the rest.
  v1::JobSpec head, tail;
  const auto* d = rest.GetDescriptor();
  const auto* r = rest.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const bool before = f->number() < v1::JobSpec::kKernelsFieldNumber;
    v1::JobSpec& into = before ? head : tail;
    if (f->is_repeated() ? r->FieldSize(rest, f) > 0 : r->HasField(rest, f)) {
      into.GetReflection()->SwapFields(&into, &rest, {f});
    }
  }
  AppendMessage(&out, head, 0, width, rename);
  if (!spec.kernel_sources().empty()) {
    out += "kernels:\n";
    for (const auto& k : spec.kernels()) {
      auto it = spec.kernel_sources().find(k);
      std::string commit;
      for (const v1::Build& b : builds) {
        if (b.label() == k && v1::BuildStateOf(b) == v1::BUILD_STATE_DONE &&
            !b.base_commit().empty()) {
          commit = b.base_commit();
        }
      }
      AppendKernel(&out, SpecLabel(k), it == spec.kernel_sources().end() ? nullptr : &it->second,
                   commit, width);
    }
  } else if (!spec.kernels().empty()) {
    std::vector<std::string> labels;
    for (const auto& k : spec.kernels()) labels.push_back(SpecLabel(k));
    AppendKeyValue(&out, 0, "kernels", FlowList(labels), false, width);
  }
  AppendMessage(&out, tail, 0, width, rename);
  return out;
}

}  // namespace faultline::spec
