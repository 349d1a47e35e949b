// The value type of the chat-template language: the subset of Python objects
// that Jinja2 chat templates touch (None, bool, int, float, str, list/tuple,
// dict, namespace, callables) plus Jinja2's default Undefined.
//
// Lists and dicts are shared by pointer, as in Python; the only mutation the
// (immutable sandboxed) language allows is assigning a namespace attribute.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ernie::chat_template {

class Value;
class Evaluator;

// Line and column (both 1-based) of a construct in the template source.
struct SourcePos {
  int line = 1;
  int column = 1;
};

// Arguments of a call: positional values and keyword values in call order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  SourcePos pos;
};

// A callable value: a macro, `caller`, a global such as raise_exception, or
// loop.cycle. It runs with the evaluator of the render that called it.
struct Callable {
  std::string name;
  std::function<absl::StatusOr<Value>(Evaluator&, CallArgs&)> invoke;
};

// A Python dict: insertion-ordered string keys (templates index by string).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // created by namespace(): prints differently
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // tuples print as (a, b)
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  // Undefined by default; `hint` is the message an illegal use reports.
  Value() = default;
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value MakeList(std::vector<Value> items, bool is_tuple = false);
  static Value MakeDict(std::shared_ptr<Dict> dict);
  static Value MakeCallable(std::shared_ptr<const Callable> callable);
  // Converts JSON (objects keep their key order) into a value.
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python's numbers include bool.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }
  double as_float() const { return is_float() ? std::get<double>(data_) : static_cast<double>(as_int()); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  Dict& mutable_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  const std::string& undefined_hint() const { return std::get<UndefinedHint>(data_).text; }

  // Python truthiness (Undefined is falsy).
  bool Truthy() const;
  // str(value) as Jinja prints it ({{ value }}); Undefined prints as "".
  std::string ToPrintString() const;
  // repr(value) as Python writes it inside a printed list or dict.
  std::string ToRepr() const;
  // Python ==: 1 == 1.0 == True; lists and dicts compare deeply.
  bool Equals(const Value& other) const;
  // Python's type name, for error messages ("dict object", "str object").
  std::string TypeName() const;
  // The bare Python type name ("int", "str", "NoneType"), as TypeError says it.
  std::string PythonTypeName() const;

 private:
  struct UndefinedHint {
    std::string text;
  };
  struct NoneTag {};
  using Storage = std::variant<UndefinedHint, NoneTag, bool, int64_t, double, std::string,
                               std::shared_ptr<List>, std::shared_ptr<Dict>,
                               std::shared_ptr<const Callable>>;
  explicit Value(Storage data) : data_(std::move(data)) {}

  Storage data_;
};

// Python's repr of a float ("1.0", "0.1", "1e+16", "inf").
std::string FormatPythonFloat(double d);
// Python's repr of a str (quotes chosen as Python chooses them).
std::string PythonStringRepr(std::string_view s);

}  // namespace ernie::chat_template
