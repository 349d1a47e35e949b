// A process's metrics: families of counters, gauges and histograms with
// labels, written in the Prometheus text exposition format 0.0.4.
//
//   Registry registry({{"model_name", "demo"}});
//   ERNIE_ASSIGN_OR_RETURN(auto* requests, registry.AddCounter<2>(
//       "ernie_gateway_requests_total", "HTTP requests answered.", {"route", "status"}));
//   Counter& ok_chat = requests->WithLabels({"/v1/chat/completions", "200"});  // once
//   ok_chat.Increment();                                                     // lock-free
//
// The label arity is part of a family's type, so a wrong number of label
// values does not compile. Thread-safety: every method is thread-safe.
// Registering and WithLabels take a mutex (do them once, keep the
// reference: values live as long as the registry); updating a value is a
// relaxed atomic. Callbacks run during Exposition() under the family's lock
// and must not touch the registry.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/common/metrics/metric_values.h"
#include "services/common/metrics/text_format.h"

namespace ernie::metrics {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };
std::string_view MetricTypeName(MetricType type);  // "counter", "gauge", "histogram"

// What the registry needs of a family of any value type and arity.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }

  // HELP and TYPE lines, then one line per series (histograms: _bucket, _sum, _count).
  // `constant_labels` is the registry's `k="v"` list, already formatted (may be empty).
  void AppendTo(std::string* out, const std::string& constant_labels) const;

 protected:
  // Writes `{constant,names=values[,extra]}` for one series.
  std::string LabelBlock(const std::string& constant_labels, const std::string* values, std::string_view extra) const;
  virtual void AppendSeries(std::string* out, const std::string& constant_labels) const = 0;

  mutable std::mutex mu_;  // guards the series maps of the derived family

 private:
  std::string name_, help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

template <typename Value, size_t N>
class Family final : public FamilyBase {
 public:
  using LabelValues = std::array<std::string, N>;
  static constexpr MetricType kType = std::is_same_v<Value, Counter> ? MetricType::kCounter
                                      : std::is_same_v<Value, Gauge> ? MetricType::kGauge
                                                                     : MetricType::kHistogram;

  Family(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds)
      : FamilyBase(std::move(name), std::move(help), kType, std::move(label_names)), bounds_(std::move(bounds)) {}

  // The value for these label values, made on first use; the reference
  // stays valid for the registry's life.
  Value& WithLabels(const LabelValues& values) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(values);
    if (it == values_.end()) it = values_.emplace(values, MakeValue()).first;
    return *it->second;
  }
  Value& Get()
    requires(N == 0)
  {
    return WithLabels(LabelValues{});
  }
  // A series read at scrape time, for a value something else already keeps
  // (an engine total, /proc). For counters `read` must never decrease.
  void AddCallback(const LabelValues& values, std::function<double()> read)
    requires(!std::is_same_v<Value, Histogram>)
  {
    std::lock_guard<std::mutex> lock(mu_);
    callbacks_.insert_or_assign(values, std::move(read));
  }

 private:
  std::unique_ptr<Value> MakeValue() const {
    if constexpr (std::is_same_v<Value, Histogram>) {
      return std::make_unique<Histogram>(bounds_);
    } else {
      return std::make_unique<Value>();
    }
  }

  void AppendSeries(std::string* out, const std::string& constant_labels) const override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [labels, value] : values_) {
      if constexpr (std::is_same_v<Value, Histogram>) {
        const Histogram::Snapshot snapshot = value->Read();
        for (size_t i = 0; i <= bounds_.size(); ++i) {
          const std::string le = i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf";
          out->append(name()).append("_bucket");
          out->append(LabelBlock(constant_labels, labels.data(), "le=\"" + le + "\""));
          out->append(" ").append(FormatValue(static_cast<double>(snapshot.cumulative[i]))).append("\n");
        }
        out->append(name()).append("_sum").append(LabelBlock(constant_labels, labels.data(), ""));
        out->append(" ").append(FormatValue(snapshot.sum)).append("\n");
        out->append(name()).append("_count").append(LabelBlock(constant_labels, labels.data(), ""));
        out->append(" ").append(FormatValue(static_cast<double>(snapshot.cumulative.back()))).append("\n");
      } else {
        AppendLine(out, constant_labels, labels, value->value());
      }
    }
    if constexpr (!std::is_same_v<Value, Histogram>) {
      for (const auto& [labels, read] : callbacks_) AppendLine(out, constant_labels, labels, read());
    }
  }

  void AppendLine(std::string* out, const std::string& constant_labels, const LabelValues& labels,
                  double value) const {
    out->append(name()).append(LabelBlock(constant_labels, labels.data(), ""));
    out->append(" ").append(FormatValue(value)).append("\n");
  }

  const std::vector<double> bounds_;                            // histograms: sorted finite upper bounds
  std::map<LabelValues, std::unique_ptr<Value>> values_;        // guarded by mu_
  std::map<LabelValues, std::function<double()>> callbacks_;    // guarded by mu_
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Labels added to every series of this registry (e.g. model_name), before
  // any family is added. InvalidArgument for a bad name, FailedPrecondition
  // once families exist.
  absl::Status AddConstantLabel(const std::string& name, const std::string& value);

  // Counters must be named *_total. Errors: InvalidArgument for a bad metric
  // or label name (named), AlreadyExists for a name registered before.
  template <size_t N = 0>
  absl::StatusOr<Family<Counter, N>*> AddCounter(std::string name, std::string help,
                                                 const std::array<std::string, N>& label_names = {}) {
    return Add<Counter, N>(std::move(name), std::move(help), label_names, {});
  }
  template <size_t N = 0>
  absl::StatusOr<Family<Gauge, N>*> AddGauge(std::string name, std::string help,
                                             const std::array<std::string, N>& label_names = {}) {
    return Add<Gauge, N>(std::move(name), std::move(help), label_names, {});
  }
  // `upper_bounds`: strictly increasing and finite (+Inf is implicit).
  template <size_t N = 0>
  absl::StatusOr<Family<Histogram, N>*> AddHistogram(std::string name, std::string help,
                                                     std::vector<double> upper_bounds,
                                                     const std::array<std::string, N>& label_names = {}) {
    return Add<Histogram, N>(std::move(name), std::move(help), label_names, std::move(upper_bounds));
  }

  // Every family in registration order, as text format 0.0.4.
  std::string Exposition() const;
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  template <typename Value, size_t N>
  absl::StatusOr<Family<Value, N>*> Add(std::string name, std::string help, const std::array<std::string, N>& labels,
                                        std::vector<double> bounds) {
    std::vector<std::string> label_names(labels.begin(), labels.end());
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = ValidateLocked(name, Family<Value, N>::kType, label_names, bounds); !s.ok()) return s;
    auto family = std::make_unique<Family<Value, N>>(std::move(name), std::move(help), std::move(label_names),
                                                     std::move(bounds));
    Family<Value, N>* raw = family.get();
    families_.push_back(std::move(family));
    return raw;
  }
  absl::Status ValidateLocked(const std::string& name, MetricType type, const std::vector<std::string>& labels,
                              const std::vector<double>& bounds) const;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;  // guarded by mu_; registration order
  LabelPairs constant_labels_;                         // guarded by mu_
  std::string constant_label_text_;                    // `k="v",...` of constant_labels_
};

}  // namespace ernie::metrics
