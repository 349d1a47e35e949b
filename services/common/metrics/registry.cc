#include "services/common/metrics/registry.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ernie::metrics {

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void FamilyBase::AppendTo(std::string* out, const std::string& constant_labels) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n", "# TYPE ", name_, " ", std::string(MetricTypeName(type_)),
                  "\n");
  AppendSeries(out, constant_labels);
}

std::string FamilyBase::LabelBlock(const std::string& constant_labels, const std::string* values,
                                   std::string_view extra) const {
  std::string block = constant_labels;
  for (size_t i = 0; i < label_names_.size(); ++i) {
    if (!block.empty()) block += ',';
    absl::StrAppend(&block, label_names_[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) {
    if (!block.empty()) block += ',';
    block.append(extra);
  }
  return block.empty() ? std::string() : absl::StrCat("{", block, "}");
}

absl::Status Registry::AddConstantLabel(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!IsValidLabelName(name)) return absl::InvalidArgumentError(absl::StrCat("invalid label name '", name, "'"));
  if (!families_.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("constant label '", name, "' must be added before the first metric family"));
  for (const auto& [existing, unused] : constant_labels_)
    if (existing == name) return absl::AlreadyExistsError(absl::StrCat("constant label '", name, "' is set twice"));
  constant_labels_.emplace_back(name, value);
  if (!constant_label_text_.empty()) constant_label_text_ += ',';
  absl::StrAppend(&constant_label_text_, name, "=\"", EscapeLabelValue(value), "\"");
  return absl::OkStatus();
}

absl::Status Registry::ValidateLocked(const std::string& name, MetricType type, const std::vector<std::string>& labels,
                                      const std::vector<double>& bounds) const {
  if (!IsValidMetricName(name)) return absl::InvalidArgumentError(absl::StrCat("invalid metric name '", name, "'"));
  if (type == MetricType::kCounter && !absl::EndsWith(name, "_total"))
    return absl::InvalidArgumentError(absl::StrCat("counter '", name, "' must end in _total"));
  for (const auto& family : families_)
    if (family->name() == name) return absl::AlreadyExistsError(absl::StrCat("metric '", name, "' is registered twice"));
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!IsValidLabelName(labels[i]))
      return absl::InvalidArgumentError(absl::StrCat("metric '", name, "': invalid label name '", labels[i], "'"));
    if (type == MetricType::kHistogram && labels[i] == "le")
      return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "' may not have a label 'le'"));
    for (size_t j = 0; j < i; ++j)
      if (labels[j] == labels[i])
        return absl::InvalidArgumentError(absl::StrCat("metric '", name, "': label '", labels[i], "' is repeated"));
    for (const auto& [constant, unused] : constant_labels_)
      if (constant == labels[i])
        return absl::InvalidArgumentError(
            absl::StrCat("metric '", name, "': label '", labels[i], "' is already a constant label"));
  }
  if (type == MetricType::kHistogram) {
    if (bounds.empty()) return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "' has no buckets"));
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (!std::isfinite(bounds[i]))
        return absl::InvalidArgumentError(absl::StrCat("histogram '", name, "': bucket ", i, " is not finite"));
      if (i > 0 && bounds[i] <= bounds[i - 1])
        return absl::InvalidArgumentError(
            absl::StrCat("histogram '", name, "': bucket bounds must increase (", bounds[i - 1], " then ", bounds[i], ")"));
    }
  }
  return absl::OkStatus();
}

std::string Registry::Exposition() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& family : families_) family->AppendTo(&out, constant_label_text_);
  return out;
}

}  // namespace ernie::metrics
