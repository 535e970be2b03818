#pragma once
// Prometheus text exposition (format 0.0.4) written straight into strings. /metrics holds
// one series per board, kernel and study (40,000 at 1,000 boards x 2 kernels x 20 studies)
// and ~13 per A/B comparison; building them as prometheus-cpp families (a label map and a
// hash per series, then a copy per Collect) took seconds and ~1.5 GB for 350,000 series.
// Samples are appended as text, by family, so a family's samples stay together as the
// format requires; a finished job's samples can be rendered once and appended again.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline::controller {

using Label = std::pair<std::string_view, std::string_view>;

// name{k="v",...} value\n, labels sorted by name, values escaped (\\, \", \n); NaN and
// +Inf/-Inf spelled as Prometheus does.
void AppendSample(std::string* out, std::string_view metric, const std::vector<Label>& labels,
                  double value, std::initializer_list<Label> extra = {});

class TextFamily {
 public:
  TextFamily(std::string name, std::string help, std::string type = "gauge")
      : name_(std::move(name)), help_(std::move(help)), type_(std::move(type)) {}

  void Add(const std::vector<Label>& labels, double value,
           std::initializer_list<Label> extra = {}) {
    AppendSample(&samples_, name_, labels, value, extra);
  }
  // Samples rendered before with AppendSample (this family's name).
  void Append(std::string_view samples) { samples_.append(samples); }
  const std::string& name() const { return name_; }
  // # HELP, # TYPE and the samples.
  void WriteTo(std::string* out) const;
  // # HELP and # TYPE only: the caller appends the samples right after (AppendSample with
  // name()), without a copy through this family.
  void WriteHeaderTo(std::string* out) const;

 private:
  std::string name_, help_, type_;
  std::string samples_;
};

}  // namespace faultline::controller
