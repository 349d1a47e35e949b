// Jinja2's filters as chat templates use them, and Hugging Face's tojson.
#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/builtins.h"
#include "services/tokenizer/template/json_dump.h"
#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {
namespace {

constexpr std::string_view kFilters[] = {
    "trim", "length", "count", "tojson", "string", "lower", "upper", "title", "capitalize", "join",
    "default", "d", "items", "selectattr", "rejectattr", "select", "reject", "first", "last", "list",
    "map", "replace", "int", "float", "safe", "indent", "reverse", "abs", "round", "sum", "min", "max",
    "unique", "sort", "attr", "wordcount", "center"};

absl::Status FilterError(std::string_view filter, std::string_view message) {
  return absl::InvalidArgumentError(Cat("filter '", filter, "': ", message));
}

bool ArgTruthy(const Value* arg, bool fallback) { return arg == nullptr ? fallback : arg->Truthy(); }

// Resolves "a.b.0" the way Jinja2's make_attrgetter does.
absl::StatusOr<Value> GetDottedAttribute(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) {
      // strtoll, not stoll: an index past 64 bits is an error, not an exception.
      errno = 0;
      const long long index = std::strtoll(part.c_str(), nullptr, 10);
      if (errno == ERANGE) return absl::InvalidArgumentError(Cat("attribute index '", part, "' is out of range"));
      ERNIE_ASSIGN_OR_RETURN(current, GetItem(current, Value::Int(index)));
    } else {
      ERNIE_ASSIGN_OR_RETURN(current, GetItem(current, Value::String(part)));
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// selectattr / rejectattr / select / reject share one loop.
absl::StatusOr<Value> SelectItems(std::string_view filter, const Value& operand, const CallArgs& args, bool by_attribute,
                                  bool keep_matches) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return FilterError(filter, "needs an attribute name");
    }
    attribute = args.positional[0].as_string();
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return FilterError(filter, "test name must be a string");
    test = args.positional[next].as_string();
    if (!IsKnownTest(test)) return FilterError(filter, Cat("unsupported test '", test, "'"));
    test_args.positional.assign(args.positional.begin() + static_cast<long>(next) + 1, args.positional.end());
  }
  if (!args.keyword.empty()) return FilterError(filter, "takes no keyword arguments");
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  std::vector<Value> kept;
  for (Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      ERNIE_ASSIGN_OR_RETURN(subject, GetDottedAttribute(item, attribute));
    }
    bool matched = false;
    if (test.empty()) {
      matched = subject.Truthy();
    } else {
      ERNIE_ASSIGN_OR_RETURN(matched, ApplyTest(test, subject, test_args));
    }
    if (matched == keep_matches) kept.push_back(std::move(item));
  }
  return Value::MakeList(std::move(kept));
}

absl::StatusOr<Value> ToJson(const Value& operand, const CallArgs& args) {
  // Hugging Face: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  ERNIE_RETURN_IF_ERROR(a.status());
  JsonDumpOptions options;
  options.ensure_ascii = ArgTruthy(a.Get(0), false);
  if (const Value* indent = a.Get(1); indent != nullptr && !indent->is_none()) {
    options.has_indent = true;
    if (indent->is_string()) {
      options.indent = indent->as_string();
    } else if (indent->is_int()) {
      options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent->as_int())), ' ');
    } else {
      return FilterError("tojson", "indent must be an integer or a string");
    }
    options.item_separator = ",";
  }
  if (const Value* separators = a.Get(2); separators != nullptr && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().items.size() != 2 ||
        !separators->as_list().items[0].is_string() || !separators->as_list().items[1].is_string()) {
      return FilterError("tojson", "separators must be a pair of strings");
    }
    options.item_separator = separators->as_list().items[0].as_string();
    options.key_separator = separators->as_list().items[1].as_string();
  }
  options.sort_keys = ArgTruthy(a.Get(3), false);
  ERNIE_ASSIGN_OR_RETURN(std::string text, DumpJson(operand, options));
  return Value::String(std::move(text));
}

absl::StatusOr<Value> Indent(const Value& operand, const CallArgs& args) {
  ArgBinder a("indent", args, {"width", "first", "blank"});
  ERNIE_RETURN_IF_ERROR(a.status());
  std::string indentation = "    ";
  if (const Value* width = a.Get(0)) {
    if (width->is_string()) {
      indentation = width->as_string();
    } else if (width->is_int()) {
      indentation = std::string(static_cast<size_t>(std::max<int64_t>(0, width->as_int())), ' ');
    } else {
      return FilterError("indent", "width must be an integer or a string");
    }
  }
  // Jinja2 3.1 appends a newline before splitting (so a trailing newline
  // yields no indented empty line) and rejoins with "\n".
  const std::vector<std::string> lines = PythonSplitLines(operand.ToPrintString() + "\n");
  std::string out;
  if (ArgTruthy(a.Get(2), false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indentation;
      out += lines[i];
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indentation;
      out += lines[i];
    }
  }
  if (ArgTruthy(a.Get(1), false)) out = indentation + out;
  return Value::String(std::move(out));
}

// Python's int() of a string: optional sign, digits, underscores, spaces.
std::optional<int64_t> ParseIntText(const std::string& text, int base) {
  const std::string trimmed = PythonStrip(text, std::nullopt, StripSide::kBoth);
  if (trimmed.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(trimmed.c_str(), &end, base);
  if (errno != 0 || end != trimmed.c_str() + trimmed.size()) return std::nullopt;
  return parsed;
}

std::optional<double> ParseFloatText(const std::string& text) {
  const std::string trimmed = PythonStrip(text, std::nullopt, StripSide::kBoth);
  if (trimmed.empty()) return std::nullopt;
  char* end = nullptr;
  const double parsed = std::strtod(trimmed.c_str(), &end);
  if (end != trimmed.c_str() + trimmed.size()) return std::nullopt;
  return parsed;
}

absl::StatusOr<Value> ToInt(const Value& operand, const CallArgs& args) {
  ArgBinder a("int", args, {"default", "base"});
  ERNIE_RETURN_IF_ERROR(a.status());
  const Value fallback = a.Get(0) != nullptr ? *a.Get(0) : Value::Int(0);
  const int base = a.Get(1) != nullptr && a.Get(1)->is_int() ? static_cast<int>(a.Get(1)->as_int()) : 10;
  if (operand.is_int() || operand.is_bool()) return Value::Int(operand.as_int());
  if (operand.is_float()) {
    if (!std::isfinite(operand.as_float())) return fallback;
    return Value::Int(static_cast<int64_t>(operand.as_float()));
  }
  if (operand.is_string()) {
    if (std::optional<int64_t> parsed = ParseIntText(operand.as_string(), base)) return Value::Int(*parsed);
    if (std::optional<double> parsed = ParseFloatText(operand.as_string()); parsed && std::isfinite(*parsed)) {
      return Value::Int(static_cast<int64_t>(*parsed));
    }
  }
  return fallback;
}

absl::StatusOr<Value> ToFloat(const Value& operand, const CallArgs& args) {
  ArgBinder a("float", args, {"default"});
  ERNIE_RETURN_IF_ERROR(a.status());
  if (operand.is_number()) return Value::Float(operand.as_float());
  if (operand.is_string()) {
    if (std::optional<double> parsed = ParseFloatText(operand.as_string())) return Value::Float(*parsed);
  }
  return a.Get(0) != nullptr ? *a.Get(0) : Value::Float(0.0);
}

absl::StatusOr<Value> Round(const Value& operand, const CallArgs& args) {
  ArgBinder a("round", args, {"precision", "method"});
  ERNIE_RETURN_IF_ERROR(a.status());
  if (!operand.is_number()) return FilterError("round", "needs a number");
  const int precision = a.Get(0) != nullptr && a.Get(0)->is_int() ? static_cast<int>(a.Get(0)->as_int()) : 0;
  const std::string method = a.Get(1) != nullptr && a.Get(1)->is_string() ? a.Get(1)->as_string() : "common";
  const double value = operand.as_float();
  if (method == "common") {
    // Python's round(): correctly rounded from the exact binary value, ties
    // to even, which is what printf's %.*f does in glibc.
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", std::max(0, precision), value);
    return Value::Float(std::strtod(buffer, nullptr));
  }
  const double scale = std::pow(10.0, precision);
  if (method == "floor") return Value::Float(std::floor(value * scale) / scale);
  if (method == "ceil") return Value::Float(std::ceil(value * scale) / scale);
  return FilterError("round", "method must be 'common', 'ceil' or 'floor'");
}

absl::StatusOr<Value> MapItems(const Value& operand, const CallArgs& args) {
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  std::vector<Value> mapped;
  mapped.reserve(items.size());
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [name, value] : args.keyword) {
    if (name == "attribute") {
      attribute = &value;
    } else if (name == "default") {
      fallback = &value;
    } else if (args.positional.empty()) {
      return FilterError("map", Cat("unexpected keyword argument '", name, "'"));
    }
  }
  if (attribute != nullptr) {
    if (!attribute->is_string()) return FilterError("map", "attribute must be a string");
    for (const Value& item : items) {
      ERNIE_ASSIGN_OR_RETURN(Value picked, GetDottedAttribute(item, attribute->as_string()));
      mapped.push_back(picked.is_undefined() && fallback != nullptr ? *fallback : std::move(picked));
    }
    return Value::MakeList(std::move(mapped));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return FilterError("map", "needs attribute=... or a filter name");
  }
  const std::string filter = args.positional[0].as_string();
  if (!IsKnownFilter(filter)) return FilterError("map", Cat("unsupported filter '", filter, "'"));
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : items) {
    ERNIE_ASSIGN_OR_RETURN(Value result, ApplyFilter(filter, item, filter_args));
    mapped.push_back(std::move(result));
  }
  return Value::MakeList(std::move(mapped));
}

absl::StatusOr<Value> Join(const Value& operand, const CallArgs& args) {
  ArgBinder a("join", args, {"d", "attribute"});
  ERNIE_RETURN_IF_ERROR(a.status());
  const std::string separator = a.Get(0) != nullptr ? a.Get(0)->ToPrintString() : "";
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    if (a.Get(1) != nullptr) {
      ERNIE_ASSIGN_OR_RETURN(Value picked, GetDottedAttribute(items[i], a.Get(1)->ToPrintString()));
      out += picked.ToPrintString();
    } else {
      out += items[i].ToPrintString();
    }
  }
  return Value::String(std::move(out));
}

// The sort key of Jinja2's sort/unique/min/max: strings fold case unless
// case_sensitive.
absl::StatusOr<bool> LessThan(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_string() && b.is_string() && !case_sensitive) {
    return PythonLower(a.as_string()) < PythonLower(b.as_string());
  }
  CallArgs other;
  other.positional.push_back(b);
  return ApplyTest("lt", a, other);
}

absl::StatusOr<Value> Sort(const Value& operand, const CallArgs& args) {
  ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"});
  ERNIE_RETURN_IF_ERROR(a.status());
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  const bool reverse = ArgTruthy(a.Get(0), false);
  const bool case_sensitive = ArgTruthy(a.Get(1), false);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (Value& item : items) {
    Value key = item;
    if (a.Get(2) != nullptr) {
      ERNIE_ASSIGN_OR_RETURN(key, GetDottedAttribute(item, a.Get(2)->ToPrintString()));
    }
    keyed.emplace_back(std::move(key), std::move(item));
  }
  absl::Status status;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    absl::StatusOr<bool> less = reverse ? LessThan(y.first, x.first, case_sensitive)
                                        : LessThan(x.first, y.first, case_sensitive);
    if (!less.ok()) {
      status = less.status();
      return false;
    }
    return *less;
  });
  ERNIE_RETURN_IF_ERROR(status);
  std::vector<Value> sorted;
  for (auto& [key, item] : keyed) sorted.push_back(std::move(item));
  return Value::MakeList(std::move(sorted));
}

absl::StatusOr<Value> MinMax(std::string_view filter, const Value& operand, const CallArgs& args) {
  ArgBinder a(filter, args, {"case_sensitive", "attribute"});
  ERNIE_RETURN_IF_ERROR(a.status());
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  if (items.empty()) return Value::Undefined(Cat("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    ERNIE_ASSIGN_OR_RETURN(bool less, filter == "min" ? LessThan(items[i], items[best], ArgTruthy(a.Get(0), false))
                                                      : LessThan(items[best], items[i], ArgTruthy(a.Get(0), false)));
    if (less) best = i;
  }
  return items[best];
}

absl::StatusOr<Value> Sum(const Value& operand, const CallArgs& args) {
  ArgBinder a("sum", args, {"attribute", "start"});
  ERNIE_RETURN_IF_ERROR(a.status());
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  Value total = a.Get(1) != nullptr ? *a.Get(1) : Value::Int(0);
  for (const Value& item : items) {
    Value term = item;
    if (a.Get(0) != nullptr) {
      ERNIE_ASSIGN_OR_RETURN(term, GetDottedAttribute(item, a.Get(0)->ToPrintString()));
    }
    // Python's sum adds with `+` (lists concatenate) but refuses strings.
    if (term.is_string() || total.is_string()) return FilterError("sum", "can't sum strings, use join");
    absl::StatusOr<Value> next = Arithmetic("+", total, term);
    if (!next.ok()) return FilterError("sum", std::string(next.status().message()));
    total = *std::move(next);
  }
  return total;
}

absl::StatusOr<Value> FirstOrLast(std::string_view filter, const Value& operand) {
  ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
  if (items.empty()) {
    return Value::Undefined(Cat("No ", filter, " item, sequence was empty."));
  }
  return filter == "first" ? items.front() : items.back();
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args) {
  auto no_args = [&]() { return ArgBinder(Cat("filter '", name, "'"), args, {}).status(); };
  if (name == "safe" || name == "string" || name == "lower" || name == "upper" || name == "title" ||
      name == "capitalize" || name == "length" || name == "count" || name == "items" || name == "list" ||
      name == "first" || name == "last" || name == "reverse" || name == "abs" || name == "wordcount") {
    ERNIE_RETURN_IF_ERROR(no_args());
  }
  if (name == "safe") return operand;
  if (name == "string") return Value::String(operand.ToPrintString());
  if (name == "lower") return Value::String(PythonLower(operand.ToPrintString()));
  if (name == "upper") return Value::String(PythonUpper(operand.ToPrintString()));
  if (name == "title") return Value::String(PythonTitle(operand.ToPrintString()));
  if (name == "capitalize") return Value::String(PythonCapitalize(operand.ToPrintString()));
  if (name == "wordcount") {
    return Value::Int(static_cast<int64_t>(PythonSplit(operand.ToPrintString(), std::nullopt, -1).size()));
  }
  if (name == "length" || name == "count") {
    ERNIE_ASSIGN_OR_RETURN(int64_t length, PythonLength(operand));
    return Value::Int(length);
  }
  if (name == "trim") {
    ArgBinder a("trim", args, {"chars"});
    ERNIE_RETURN_IF_ERROR(a.status());
    std::optional<std::string> chars;
    if (a.Get(0) != nullptr && !a.Get(0)->is_none()) chars = a.Get(0)->ToPrintString();
    return Value::String(PythonStrip(operand.ToPrintString(), chars, StripSide::kBoth));
  }
  if (name == "center") {
    ArgBinder a("center", args, {"width"});
    ERNIE_RETURN_IF_ERROR(a.status());
    const std::string s = operand.ToPrintString();
    const int64_t width = a.Get(0) != nullptr && a.Get(0)->is_int() ? a.Get(0)->as_int() : 80;
    const auto length = static_cast<int64_t>(CodePointCount(s));
    if (width <= length) return Value::String(s);
    const int64_t pad = width - length;
    const int64_t left = pad / 2 + (pad & width & 1);  // Python's str.center split
    return Value::String(std::string(left, ' ') + s + std::string(pad - left, ' '));
  }
  if (name == "tojson") return ToJson(operand, args);
  if (name == "join") return Join(operand, args);
  if (name == "default" || name == "d") {
    ArgBinder a(name, args, {"default_value", "boolean"});
    ERNIE_RETURN_IF_ERROR(a.status());
    const bool use_default = operand.is_undefined() || (ArgTruthy(a.Get(1), false) && !operand.Truthy());
    if (!use_default) return operand;
    return a.Get(0) != nullptr ? *a.Get(0) : Value::String("");
  }
  if (name == "items") {
    if (operand.is_undefined()) return Value::MakeList({});
    if (!operand.is_dict() || operand.as_dict().is_namespace) return FilterError("items", "needs a mapping");
    std::vector<Value> pairs;
    for (const auto& [key, value] : operand.as_dict().items) {
      pairs.push_back(Value::MakeList({Value::String(key), value}, /*is_tuple=*/true));
    }
    return Value::MakeList(std::move(pairs));
  }
  if (name == "selectattr") return SelectItems(name, operand, args, true, true);
  if (name == "rejectattr") return SelectItems(name, operand, args, true, false);
  if (name == "select") return SelectItems(name, operand, args, false, true);
  if (name == "reject") return SelectItems(name, operand, args, false, false);
  if (name == "first" || name == "last") return FirstOrLast(name, operand);
  if (name == "list") {
    ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
    return Value::MakeList(std::move(items));
  }
  if (name == "map") return MapItems(operand, args);
  if (name == "replace") {
    ArgBinder a("replace", args, {"old", "new", "count"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr || a.Get(1) == nullptr) return FilterError("replace", "needs old and new strings");
    const int64_t count = a.Get(2) != nullptr && a.Get(2)->is_int() ? a.Get(2)->as_int() : -1;
    return Value::String(
        PythonReplace(operand.ToPrintString(), a.Get(0)->ToPrintString(), a.Get(1)->ToPrintString(), count));
  }
  if (name == "int") return ToInt(operand, args);
  if (name == "float") return ToFloat(operand, args);
  if (name == "indent") return Indent(operand, args);
  if (name == "reverse") {
    if (operand.is_string()) {
      std::vector<uint32_t> cps = DecodeUtf8(operand.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value::String(EncodeUtf8(cps));
    }
    ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "abs") {
    if (operand.is_float()) return Value::Float(std::fabs(operand.as_float()));
    if (operand.is_int() || operand.is_bool()) return Value::Int(std::llabs(operand.as_int()));
    return FilterError("abs", "needs a number");
  }
  if (name == "round") return Round(operand, args);
  if (name == "sum") return Sum(operand, args);
  if (name == "min" || name == "max") return MinMax(name, operand, args);
  if (name == "sort") return Sort(operand, args);
  if (name == "unique") {
    ArgBinder a("unique", args, {"case_sensitive", "attribute"});
    ERNIE_RETURN_IF_ERROR(a.status());
    ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(operand));
    std::vector<Value> seen_keys;
    std::vector<Value> unique;
    for (Value& item : items) {
      Value key = item;
      if (a.Get(1) != nullptr) {
        ERNIE_ASSIGN_OR_RETURN(key, GetDottedAttribute(item, a.Get(1)->ToPrintString()));
      }
      if (key.is_string() && !ArgTruthy(a.Get(0), false)) key = Value::String(PythonLower(key.as_string()));
      const bool seen = std::any_of(seen_keys.begin(), seen_keys.end(), [&](const Value& k) { return k.Equals(key); });
      if (!seen) {
        seen_keys.push_back(std::move(key));
        unique.push_back(std::move(item));
      }
    }
    return Value::MakeList(std::move(unique));
  }
  if (name == "attr") {
    ArgBinder a("attr", args, {"name"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr || !a.Get(0)->is_string()) return FilterError("attr", "needs an attribute name");
    return GetAttribute(operand, a.Get(0)->as_string());
  }
  return FilterError(name, "is not supported");
}

}  // namespace ernie::chat_template
