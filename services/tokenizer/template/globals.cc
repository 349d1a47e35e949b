// Global functions: Jinja2's range, namespace and dict, and Hugging Face's
// raise_exception and strftime_now.
#include <ctime>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"
#include "services/tokenizer/template/builtins.h"
#include "services/tokenizer/template/lexer.h"

namespace ernie::chat_template {
namespace {

// Jinja2's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> Range(Evaluator&, CallArgs& args) {
  if (!args.keyword.empty()) return absl::InvalidArgumentError("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    return absl::InvalidArgumentError("range() takes 1 to 3 integer arguments");
  }
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) return absl::InvalidArgumentError("range() arguments must be integers");
  }
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      return absl::InvalidArgumentError(Cat("range too big, the sandbox allows at most ", kMaxRange, " items"));
    }
    items.push_back(Value::Int(i));
  }
  return Value::MakeList(std::move(items));
}

// namespace(...) and dict(...): an optional mapping, then keyword arguments.
absl::StatusOr<Value> MakeMapping(CallArgs& args, bool is_namespace) {
  auto dict = std::make_shared<Dict>();
  dict->is_namespace = is_namespace;
  const char* name = is_namespace ? "namespace" : "dict";
  if (args.positional.size() > 1) return absl::InvalidArgumentError(Cat(name, "() takes at most 1 positional argument"));
  if (args.positional.size() == 1) {
    const Value& initial = args.positional[0];
    if (!initial.is_dict() || initial.as_dict().is_namespace) {
      return absl::InvalidArgumentError(Cat(name, "() positional argument must be a mapping"));
    }
    dict->items = initial.as_dict().items;
  }
  for (auto& [key, value] : args.keyword) dict->Set(key, value);
  return Value::MakeDict(std::move(dict));
}

absl::StatusOr<Value> RaiseException(Evaluator&, CallArgs& args) {
  std::string message;
  if (!args.positional.empty()) message = args.positional[0].ToPrintString();
  return absl::InvalidArgumentError(
      Cat("chat template raised an exception at ", DescribePos(args.pos), ": ", message));
}

absl::StatusOr<Value> StrftimeNow(Evaluator&, CallArgs& args) {
  if (args.positional.size() != 1 || !args.positional[0].is_string() || !args.keyword.empty()) {
    return absl::InvalidArgumentError("strftime_now() takes one format string");
  }
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[256];
  const size_t written = std::strftime(buffer, sizeof(buffer), args.positional[0].as_string().c_str(), &local);
  return Value::String(std::string(buffer, written));
}

Value MakeGlobal(std::string name, std::function<absl::StatusOr<Value>(Evaluator&, CallArgs&)> invoke) {
  auto callable = std::make_shared<Callable>();
  callable->name = std::move(name);
  callable->invoke = std::move(invoke);
  return Value::MakeCallable(std::move(callable));
}

}  // namespace

std::optional<Value> GetGlobal(std::string_view name) {
  // Built once; callables are immutable, so sharing them across renders is safe.
  static const Value* const kRange = new Value(MakeGlobal("range", Range));
  static const Value* const kNamespace =
      new Value(MakeGlobal("namespace", [](Evaluator&, CallArgs& args) { return MakeMapping(args, true); }));
  static const Value* const kDict =
      new Value(MakeGlobal("dict", [](Evaluator&, CallArgs& args) { return MakeMapping(args, false); }));
  static const Value* const kRaise = new Value(MakeGlobal("raise_exception", RaiseException));
  static const Value* const kStrftime = new Value(MakeGlobal("strftime_now", StrftimeNow));
  if (name == "range") return *kRange;
  if (name == "namespace") return *kNamespace;
  if (name == "dict") return *kDict;
  if (name == "raise_exception") return *kRaise;
  if (name == "strftime_now") return *kStrftime;
  return std::nullopt;
}

}  // namespace ernie::chat_template
