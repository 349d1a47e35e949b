// Jinja2's filters, tests and globals, Hugging Face's additions
// (raise_exception, tojson, strftime_now), and the Python methods of str
// and dict that chat templates call. Each returns plain error messages; the
// evaluator adds the position.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/tokenizer/template/value.h"

namespace ernie::chat_template {

// Binds a call's arguments to named parameters the way Python does.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params);
  const absl::Status& status() const { return status_; }
  // The argument bound to parameter `i`, or null when not given.
  const Value* Get(size_t i) const { return i < bound_.size() ? bound_[i] : nullptr; }

 private:
  std::vector<const Value*> bound_;
  absl::Status status_;
};

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& operand, const CallArgs& args);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& operand, const CallArgs& args);

// obj.name as Python's getattr resolves it for str, dict and list: a bound
// method, or nullopt when the type has no such method.
std::optional<Value> GetMethod(const Value& object, std::string_view name);

// A global function (range, namespace, dict, raise_exception,
// strftime_now), or nullopt.
std::optional<Value> GetGlobal(std::string_view name);

// Shared helpers of the builtins and the evaluator.
absl::Status UndefinedError(const Value& undefined);
// Items a for loop or filter iterates over: list items, dict keys, string
// code points; Undefined iterates as empty.
absl::StatusOr<std::vector<Value>> IterateValue(const Value& value);
// obj.attr or obj[key] as Jinja2 resolves them; never fails on a defined
// object (misses give Undefined), fails on Undefined.
absl::StatusOr<Value> GetAttribute(const Value& object, std::string_view name);
absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
// object[start:stop:step] for lists, tuples and strings (None bounds allowed).
absl::StatusOr<Value> SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step);
// a op b for Jinja2's binary arithmetic (+ - * / // % **) with Python's
// semantics; 64-bit integer overflow is an error, never a wrapped value.
absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b);
// len(value) as Python computes it.
absl::StatusOr<int64_t> PythonLength(const Value& value);

}  // namespace ernie::chat_template
