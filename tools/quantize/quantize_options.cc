#include "tools/quantize/quantize_options.h"

#include <algorithm>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/awq_format.h"

namespace ernie::quantize {

namespace {

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return absl::InvalidArgumentError(absl::StrCat(flag, " wants an integer, got '", text, "'"));
  if (v < min || v > max)
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be in [", min, ", ", max, "], got ", v));
  return v;
}

}  // namespace

absl::StatusOr<QuantizeOptions> ParseQuantizeArgs(const std::vector<std::string>& args,
                                                  const std::string& default_calib) {
  QuantizeOptions o;
  o.calib_file = default_calib;
  std::vector<std::string> positional;
  bool calib_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    std::string flag = a, value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      value = args[++i];
    }
    if (flag == "--method") {
      if (value == "awq") o.method = QuantMethod::kAwq;
      else if (value == "rtn") o.method = QuantMethod::kRtn;
      else return absl::InvalidArgumentError(absl::StrCat("--method must be awq or rtn, got '", value, "'"));
    } else if (flag == "--group-size") {
      auto v = ParseInt(flag, value, 1, 1 << 20);
      if (!v.ok()) return v.status();
      if (std::find(kAwqGroupSizes.begin(), kAwqGroupSizes.end(), *v) == kAwqGroupSizes.end())
        return absl::InvalidArgumentError(
            absl::StrCat("--group-size must be one of ", absl::StrJoin(kAwqGroupSizes, ", "), ", got ", *v));
      o.group_size = *v;
    } else if (flag == "--calib") {
      if (value.empty()) return absl::InvalidArgumentError("--calib needs a file name");
      o.calib_file = value;
      calib_given = true;
    } else if (flag == "--calib-tokens") {
      auto v = ParseInt(flag, value, 1, 1 << 20);
      if (!v.ok()) return v.status();
      o.calib_tokens = *v;
    } else if (flag == "--alpha-grid") {
      auto v = ParseInt(flag, value, 1, 1000);
      if (!v.ok()) return v.status();
      o.alpha_grid = static_cast<int>(*v);
    } else if (flag == "--threads") {
      auto v = ParseInt(flag, value, 0, 1024);
      if (!v.ok()) return v.status();
      o.threads = static_cast<int>(*v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option ", flag));
    }
  }
  if (positional.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("expected IN and OUT directories, got ", positional.size(),
                                                   " positional argument(s)"));
  o.input_dir = positional[0];
  o.output_dir = positional[1];
  if (o.input_dir == o.output_dir) return absl::InvalidArgumentError("IN and OUT must be different directories");
  if (calib_given && o.method == QuantMethod::kRtn)
    return absl::InvalidArgumentError("--calib is for --method awq (rtn uses no calibration)");
  return o;
}

}  // namespace ernie::quantize
