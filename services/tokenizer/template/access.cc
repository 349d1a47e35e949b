// Attribute and item access, iteration, len(), and the str / dict methods.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/builtins.h"
#include "services/tokenizer/template/string_util.h"

namespace ernie::chat_template {
namespace {

absl::Status TypeError(std::string_view message) { return absl::InvalidArgumentError(std::string(message)); }

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& part : parts) items.push_back(Value::String(std::move(part)));
  return Value::MakeList(std::move(items));
}

absl::StatusOr<std::optional<std::string>> OptionalStringArg(const Value* arg, std::string_view what) {
  if (arg == nullptr || arg->is_none()) return std::optional<std::string>();
  if (!arg->is_string()) return TypeError(Cat(what, " must be a string or None, not ", arg->TypeName()));
  return std::optional<std::string>(arg->as_string());
}

absl::StatusOr<int64_t> IntArg(const Value* arg, int64_t fallback, std::string_view what) {
  if (arg == nullptr) return fallback;
  if (!arg->is_int() && !arg->is_bool()) return TypeError(Cat(what, " must be an integer"));
  return arg->as_int();
}

// startswith / endswith accept a string or a tuple of strings.
absl::StatusOr<bool> MatchAffix(const std::string& s, const Value& affix, bool prefix) {
  auto matches = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return matches(affix.as_string());
  if (affix.is_list() && affix.as_list().is_tuple) {
    for (const Value& item : affix.as_list().items) {
      if (!item.is_string()) return TypeError("tuple for startswith/endswith must only contain str");
      if (matches(item.as_string())) return true;
    }
    return false;
  }
  return TypeError("startswith/endswith argument must be str or a tuple of str");
}

absl::StatusOr<Value> CallStringMethod(const std::string& s, std::string_view method, const CallArgs& args) {
  auto bind = [&](std::initializer_list<std::string_view> params) {
    return ArgBinder(Cat("str.", method), args, params);
  };
  if (method == "strip" || method == "lstrip" || method == "rstrip") {
    ArgBinder a = bind({"chars"});
    ERNIE_RETURN_IF_ERROR(a.status());
    ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> chars, OptionalStringArg(a.Get(0), "strip chars"));
    const StripSide side = method == "strip" ? StripSide::kBoth : method == "lstrip" ? StripSide::kLeft : StripSide::kRight;
    return Value::String(PythonStrip(s, chars, side));
  }
  if (method == "split") {
    ArgBinder a = bind({"sep", "maxsplit"});
    ERNIE_RETURN_IF_ERROR(a.status());
    ERNIE_ASSIGN_OR_RETURN(std::optional<std::string> sep, OptionalStringArg(a.Get(0), "split separator"));
    if (sep.has_value() && sep->empty()) return TypeError("empty separator");
    ERNIE_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(a.Get(1), -1, "maxsplit"));
    return StringList(PythonSplit(s, sep, maxsplit));
  }
  if (method == "splitlines") {
    ArgBinder a = bind({});
    ERNIE_RETURN_IF_ERROR(a.status());
    return StringList(PythonSplitLines(s));
  }
  if (method == "startswith" || method == "endswith") {
    ArgBinder a = bind({"affix"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr) return TypeError(Cat(method, "() takes at least 1 argument"));
    ERNIE_ASSIGN_OR_RETURN(bool matched, MatchAffix(s, *a.Get(0), method == "startswith"));
    return Value::Bool(matched);
  }
  if (method == "upper" || method == "lower" || method == "title" || method == "capitalize" ||
      method == "isdigit" || method == "isspace" || method == "isalpha") {
    ArgBinder a = bind({});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (method == "upper") return Value::String(PythonUpper(s));
    if (method == "lower") return Value::String(PythonLower(s));
    if (method == "title") return Value::String(PythonTitle(s));
    if (method == "capitalize") return Value::String(PythonCapitalize(s));
    const std::vector<uint32_t> cps = DecodeUtf8(s);
    if (cps.empty()) return Value::Bool(false);
    return Value::Bool(std::all_of(cps.begin(), cps.end(), [&](uint32_t cp) {
      if (method == "isdigit") return cp >= '0' && cp <= '9';
      if (method == "isspace") return IsPythonSpace(cp);
      return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    }));
  }
  if (method == "replace") {
    ArgBinder a = bind({"old", "new", "count"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr || a.Get(1) == nullptr || !a.Get(0)->is_string() || !a.Get(1)->is_string()) {
      return TypeError("str.replace() needs two string arguments");
    }
    ERNIE_ASSIGN_OR_RETURN(int64_t count, IntArg(a.Get(2), -1, "replace count"));
    return Value::String(PythonReplace(s, a.Get(0)->as_string(), a.Get(1)->as_string(), count));
  }
  if (method == "find" || method == "count") {
    ArgBinder a = bind({"sub"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr || !a.Get(0)->is_string()) return TypeError(Cat("str.", method, "() needs a string"));
    const std::string& sub = a.Get(0)->as_string();
    if (method == "find") {
      const size_t at = s.find(sub);
      return Value::Int(at == std::string::npos ? -1 : static_cast<int64_t>(CodePointCount(s.substr(0, at))));
    }
    if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
    int64_t count = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++count;
    return Value::Int(count);
  }
  if (method == "join") {
    ArgBinder a = bind({"iterable"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr) return TypeError("str.join() takes exactly one argument");
    ERNIE_ASSIGN_OR_RETURN(std::vector<Value> items, IterateValue(*a.Get(0)));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return TypeError("sequence item for str.join() must be a str");
      if (i > 0) out += s;
      out += items[i].as_string();
    }
    return Value::String(std::move(out));
  }
  return TypeError(Cat("'str' object has no attribute '", method, "'"));
}

absl::StatusOr<Value> CallDictMethod(const Dict& dict, std::string_view method, const CallArgs& args) {
  if (method == "get") {
    ArgBinder a(Cat("dict.get"), args, {"key", "default"});
    ERNIE_RETURN_IF_ERROR(a.status());
    if (a.Get(0) == nullptr) return TypeError("dict.get() takes at least 1 argument");
    const Value* found = a.Get(0)->is_string() ? dict.Find(a.Get(0)->as_string()) : nullptr;
    if (found != nullptr) return *found;
    return a.Get(1) != nullptr ? *a.Get(1) : Value::None();
  }
  ArgBinder a(Cat("dict.", method), args, {});
  ERNIE_RETURN_IF_ERROR(a.status());
  std::vector<Value> items;
  items.reserve(dict.items.size());
  for (const auto& [key, value] : dict.items) {
    if (method == "keys") {
      items.push_back(Value::String(key));
    } else if (method == "values") {
      items.push_back(value);
    } else {
      items.push_back(Value::MakeList({Value::String(key), value}, /*is_tuple=*/true));
    }
  }
  return Value::MakeList(std::move(items));
}

bool IsStringMethod(std::string_view name) {
  static constexpr std::string_view kMethods[] = {
      "strip", "lstrip", "rstrip", "split", "splitlines", "startswith", "endswith", "upper", "lower", "title",
      "capitalize", "replace", "find", "count", "join", "isdigit", "isspace", "isalpha"};
  return std::find(std::begin(kMethods), std::end(kMethods), name) != std::end(kMethods);
}

bool IsDictMethod(std::string_view name) {
  return name == "items" || name == "keys" || name == "values" || name == "get";
}

// Python's slice.indices() followed by the selection of positions.
std::vector<int64_t> SliceIndices(int64_t length, const Value& start, const Value& stop, int64_t step) {
  auto clamp = [&](const Value& bound, bool is_start) -> int64_t {
    if (bound.is_none() || bound.is_undefined()) {
      if (step > 0) return is_start ? 0 : length;
      return is_start ? length - 1 : -1;
    }
    int64_t i = bound.as_int();
    if (i < 0) {
      i += length;
      if (i < 0) i = step > 0 ? 0 : -1;
    } else if (i >= length) {
      i = step > 0 ? length : length - 1;
    }
    return i;
  };
  const int64_t begin = clamp(start, true);
  const int64_t end = clamp(stop, false);
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = begin; i < end; i += step) out.push_back(i);
  } else {
    for (int64_t i = begin; i > end; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(undefined.undefined_hint().empty() ? "value is undefined"
                                                                       : undefined.undefined_hint());
}

absl::StatusOr<std::vector<Value>> IterateValue(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>();
    case Value::Kind::kList:
      return value.as_list().items;
    case Value::Kind::kDict: {
      if (value.as_dict().is_namespace) break;
      std::vector<Value> keys;
      for (const auto& [key, unused] : value.as_dict().items) keys.push_back(Value::String(key));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (const uint32_t cp : DecodeUtf8(value.as_string())) {
        std::string c;
        AppendUtf8(c, cp);
        chars.push_back(Value::String(std::move(c)));
      }
      return chars;
    }
    default:
      break;
  }
  return TypeError(Cat("'", value.PythonTypeName(), "' object is not iterable"));
}

std::optional<Value> GetMethod(const Value& object, std::string_view name) {
  if (object.is_string() && IsStringMethod(name)) {
    auto callable = std::make_shared<Callable>();
    callable->name = Cat("str.", name);
    callable->invoke = [s = object.as_string(), method = std::string(name)](Evaluator&, CallArgs& args) {
      return CallStringMethod(s, method, args);
    };
    return Value::MakeCallable(std::move(callable));
  }
  if (object.is_dict() && !object.as_dict().is_namespace && IsDictMethod(name)) {
    auto callable = std::make_shared<Callable>();
    callable->name = Cat("dict.", name);
    callable->invoke = [object, method = std::string(name)](Evaluator&, CallArgs& args) {
      return CallDictMethod(object.as_dict(), method, args);
    };
    return Value::MakeCallable(std::move(callable));
  }
  return std::nullopt;
}

absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) return UndefinedError(object);
  if (std::optional<Value> method = GetMethod(object, name)) return *method;
  if (object.is_dict()) {
    if (const Value* found = object.as_dict().Find(name)) return *found;
  }
  return Value::Undefined(Cat(object.TypeName(), " has no attribute '", name, "'"));
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict() && key.is_string()) {
    if (const Value* found = object.as_dict().Find(key.as_string())) return *found;
  }
  if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t index = key.as_int();
    if (object.is_list()) {
      const auto length = static_cast<int64_t>(object.as_list().items.size());
      if (index < 0) index += length;
      if (index >= 0 && index < length) return object.as_list().items[index];
    } else {
      const std::vector<uint32_t> cps = DecodeUtf8(object.as_string());
      const auto length = static_cast<int64_t>(cps.size());
      if (index < 0) index += length;
      if (index >= 0 && index < length) {
        std::string c;
        AppendUtf8(c, cps[index]);
        return Value::String(std::move(c));
      }
    }
  }
  if (key.is_string()) {
    if (std::optional<Value> method = GetMethod(object, key.as_string())) return *method;
    return Value::Undefined(Cat(object.TypeName(), " has no attribute '", key.as_string(), "'"));
  }
  return Value::Undefined(Cat(object.TypeName(), " has no element ", key.ToRepr()));
}

absl::StatusOr<Value> SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) return UndefinedError(object);
  for (const Value* bound : {&start, &stop, &step}) {
    if (!bound->is_none() && !bound->is_undefined() && !bound->is_int() && !bound->is_bool()) {
      return TypeError("slice indices must be integers or None");
    }
  }
  const int64_t step_value = (step.is_none() || step.is_undefined()) ? 1 : step.as_int();
  if (step_value == 0) return TypeError("slice step cannot be zero");
  if (object.is_list()) {
    const List& list = object.as_list();
    std::vector<Value> items;
    for (const int64_t i : SliceIndices(static_cast<int64_t>(list.items.size()), start, stop, step_value)) {
      items.push_back(list.items[i]);
    }
    return Value::MakeList(std::move(items), list.is_tuple);
  }
  if (object.is_string()) {
    const std::vector<uint32_t> cps = DecodeUtf8(object.as_string());
    std::string out;
    for (const int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step_value)) {
      AppendUtf8(out, cps[i]);
    }
    return Value::String(std::move(out));
  }
  return TypeError(Cat(object.TypeName(), " is not subscriptable"));
}

absl::StatusOr<int64_t> PythonLength(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(value.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(value.as_list().items.size());
    case Value::Kind::kDict:
      if (value.as_dict().is_namespace) break;
      return static_cast<int64_t>(value.as_dict().items.size());
    default:
      break;
  }
  return TypeError(Cat("object of type ", value.TypeName(), " has no len()"));
}

}  // namespace ernie::chat_template
