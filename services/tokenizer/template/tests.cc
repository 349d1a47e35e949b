// Jinja2's tests (`x is defined`, `x is equalto y`, ...) and ArgBinder.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"
#include "services/tokenizer/template/builtins.h"

namespace ernie::chat_template {
namespace {

constexpr std::string_view kTests[] = {
    "defined", "undefined", "none", "string", "mapping", "iterable", "number", "integer", "float",
    "sequence", "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le", "<=",
    "gt", ">", "ge", ">=", "lessthan", "greaterthan", "in", "odd", "even", "divisibleby", "lower",
    "upper", "callable", "sameas"};

absl::StatusOr<bool> CompareOrder(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  int order = 0;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      order = a.as_float() < b.as_float() ? -1 : (a.as_float() > b.as_float() ? 1 : 0);
    } else {
      order = a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
  } else if (a.is_string() && b.is_string()) {
    order = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
  } else {
    return absl::InvalidArgumentError(Cat("'", op, "' not supported between instances of ", a.TypeName(),
                                                   " and ", b.TypeName()));
  }
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params)
    : bound_(params.size(), nullptr) {
  if (args.positional.size() > params.size()) {
    status_ = absl::InvalidArgumentError(Cat(function, "() takes at most ", params.size(),
                                                      " argument(s), got ", args.positional.size()));
    return;
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    const auto* it = std::find(params.begin(), params.end(), name);
    if (it == params.end()) {
      status_ = absl::InvalidArgumentError(
          Cat(function, "() got an unexpected keyword argument '", name, "'"));
      return;
    }
    const size_t index = static_cast<size_t>(it - params.begin());
    if (bound_[index] != nullptr) {
      status_ = absl::InvalidArgumentError(Cat(function, "() got multiple values for argument '", name, "'"));
      return;
    }
    bound_[index] = &value;
  }
}

bool IsKnownTest(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const bool needs_argument = name == "equalto" || name == "eq" || name == "==" || name == "ne" || name == "!=" ||
                              name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
                              name == ">" || name == "ge" || name == ">=" || name == "lessthan" ||
                              name == "greaterthan" || name == "in" || name == "divisibleby" || name == "sameas";
  ArgBinder a(Cat("test '", name, "'"), args, needs_argument ? std::initializer_list<std::string_view>{"other"}
                                                                      : std::initializer_list<std::string_view>{});
  ERNIE_RETURN_IF_ERROR(a.status());
  if (needs_argument && a.Get(0) == nullptr) {
    return absl::InvalidArgumentError(Cat("test '", name, "' needs an argument"));
  }
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.as_dict().is_namespace;
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    bool has_cased = false;
    for (const char c : s) {
      const bool lower = c >= 'a' && c <= 'z';
      const bool upper = c >= 'A' && c <= 'Z';
      if ((name == "lower" && upper) || (name == "upper" && lower)) return false;
      has_cased = has_cased || lower || upper;
    }
    return has_cased;
  }
  if (name == "odd" || name == "even") {
    if (v.is_undefined()) return UndefinedError(v);
    if (!v.is_int() && !v.is_bool()) return absl::InvalidArgumentError(Cat("test '", name, "' needs an integer"));
    const bool odd = (v.as_int() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  const Value& other = *a.Get(0);
  if (name == "equalto" || name == "eq" || name == "==") return v.Equals(other);
  if (name == "ne" || name == "!=") return !v.Equals(other);
  if (name == "sameas") {
    if (v.is_none() || v.is_bool() || other.is_none() || other.is_bool()) return v.kind() == other.kind() && v.Equals(other);
    return v.Equals(other);
  }
  if (name == "lt" || name == "<" || name == "lessthan") return CompareOrder(v, other, "<");
  if (name == "le" || name == "<=") return CompareOrder(v, other, "<=");
  if (name == "gt" || name == ">" || name == "greaterthan") return CompareOrder(v, other, ">");
  if (name == "ge" || name == ">=") return CompareOrder(v, other, ">=");
  if (name == "divisibleby") {
    if (!v.is_number() || !other.is_number() || v.is_float() || other.is_float() || other.as_int() == 0) {
      return absl::InvalidArgumentError("test 'divisibleby' needs two integers, the divisor non-zero");
    }
    return v.as_int() % other.as_int() == 0;
  }
  if (name == "in") {
    if (other.is_string() && v.is_string()) return other.as_string().find(v.as_string()) != std::string::npos;
    if (other.is_dict()) return v.is_string() && other.as_dict().Find(v.as_string()) != nullptr;
    ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(other));
    return std::any_of(items.begin(), items.end(), [&](const Value& item) { return item.Equals(v); });
  }
  return absl::InvalidArgumentError(Cat("unsupported test '", name, "'"));
}

}  // namespace ernie::chat_template
