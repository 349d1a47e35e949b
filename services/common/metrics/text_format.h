// Pieces of the Prometheus text exposition format 0.0.4: numbers, escaped
// label values and HELP text, and the validity rules for names.
#pragma once

#include <string>
#include <string_view>

namespace ernie::metrics {

// Integers as integers ("42"), other values in their shortest round-trip
// form ("0.025"), and "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);
// Label values escape backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);
// HELP text escapes backslash and newline.
std::string EscapeHelp(std::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved by Prometheus).
bool IsValidLabelName(std::string_view name);

}  // namespace ernie::metrics
