#include "services/tokenizer/template/evaluator.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/template/string_util.h"
#include "services/tokenizer/template/builtins.h"
#include "services/tokenizer/template/lexer.h"

namespace ernie::chat_template {
namespace {

constexpr int kMaxMacroDepth = 64;
constexpr int64_t kMaxRepeatedElements = int64_t{64} << 20;

absl::Status ErrorAt(SourcePos pos, std::string_view message) {
  return absl::InvalidArgumentError(Cat("chat template error at ", DescribePos(pos), ": ", message));
}

#define ERNIE_AT(pos, expr)                                    \
  do {                                                         \
    ::absl::Status ernie_at_status_ = (expr);                  \
    if (!ernie_at_status_.ok()) return AtPosition(ernie_at_status_, pos); \
  } while (false)

// Python's integers do not overflow; ours are 64-bit, so a result past
// them is an error rather than a wrapped (undefined) value.
absl::Status IntegerOverflow(const std::string& op) {
  return absl::InvalidArgumentError(
      Cat("integer overflow in '", op, "': chat template integers are 64-bit"));
}

// base ** exponent (exponent >= 0) by squaring: a huge exponent of 0, 1 or
// -1 costs 64 steps, not `exponent` of them.
absl::StatusOr<int64_t> IntegerPower(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if ((exponent & 1) != 0 && __builtin_mul_overflow(result, base, &result)) return IntegerOverflow("**");
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return IntegerOverflow("**");
  }
  return result;
}

}  // namespace

absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  auto unsupported = [&]() {
    // Python's wording, so errors read the same as under transformers.
    if (op == "+" && (a.is_string() || a.is_list())) {
      return absl::InvalidArgumentError(Cat("can only concatenate ", a.PythonTypeName(), " (not \"",
                                            b.PythonTypeName(), "\") to ", a.PythonTypeName()));
    }
    return absl::InvalidArgumentError(Cat("unsupported operand type(s) for ", op, ": '", a.PythonTypeName(),
                                          "' and '", b.PythonTypeName(), "'"));
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::String(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      if (a.as_list().is_tuple != b.as_list().is_tuple) return unsupported();
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::MakeList(std::move(items), a.as_list().is_tuple);
    }
  }
  if (op == "*") {
    const Value* text = a.is_string() || a.is_list() ? &a : (b.is_string() || b.is_list() ? &b : nullptr);
    const Value* times = text == &a ? &b : &a;
    if (text != nullptr && (times->is_int() || times->is_bool())) {
      const int64_t n = times->as_int();
      // A template's output is a prompt: a repetition past kMaxRepeatedElements
      // (characters or items) is an error, not an allocation the size of the machine.
      const auto size = static_cast<int64_t>(text->is_string() ? text->as_string().size() : text->as_list().items.size());
      if (n > 0 && size > 0 && n > kMaxRepeatedElements / size)
        return absl::InvalidArgumentError(Cat("'*' would repeat ", size, " elements ", n, " times; at most ",
                                              kMaxRepeatedElements, " elements in all"));
      if (text->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += text->as_string();
        return Value::String(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) {
        items.insert(items.end(), text->as_list().items.begin(), text->as_list().items.end());
      }
      return Value::MakeList(std::move(items), text->as_list().is_tuple);
    }
  }
  if (!a.is_number() || !b.is_number()) {
    if (op == "%" && a.is_string()) {
      return absl::InvalidArgumentError("printf-style string formatting ('%') is not supported in chat templates");
    }
    return unsupported();
  }
  const bool integral = !a.is_float() && !b.is_float();
  if (op == "/") {
    if (b.as_float() == 0.0) return absl::InvalidArgumentError("division by zero");
    return Value::Float(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (integral) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value::Int(0);
        return IntegerOverflow(op);
      }
      int64_t q = x / y;
      int64_t r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors toward -infinity
        --q;
        r += y;
      }
      return Value::Int(op == "//" ? q : r);
    }
    const double x = a.as_float();
    const double y = b.as_float();
    if (y == 0.0) return absl::InvalidArgumentError("float division or modulo by zero");
    double r = std::fmod(x, y);
    if (r != 0.0 && ((r < 0) != (y < 0))) r += y;
    if (op == "%") return Value::Float(r);
    return Value::Float(std::floor(x / y));
  }
  if (op == "**") {
    if (integral && b.as_int() >= 0) {
      ERNIE_ASSIGN_OR_RETURN(const int64_t result, IntegerPower(a.as_int(), b.as_int()));
      return Value::Int(result);
    }
    return Value::Float(std::pow(a.as_float(), b.as_float()));
  }
  if (integral) {
    int64_t result = 0;
    const bool overflow = op == "+"   ? __builtin_add_overflow(a.as_int(), b.as_int(), &result)
                          : op == "-" ? __builtin_sub_overflow(a.as_int(), b.as_int(), &result)
                          : op == "*" ? __builtin_mul_overflow(a.as_int(), b.as_int(), &result)
                                      : false;
    if (overflow) return IntegerOverflow(op);
    if (op == "+" || op == "-" || op == "*") return Value::Int(result);
  } else {
    if (op == "+") return Value::Float(a.as_float() + b.as_float());
    if (op == "-") return Value::Float(a.as_float() - b.as_float());
    if (op == "*") return Value::Float(a.as_float() * b.as_float());
  }
  return unsupported();
}

namespace {

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(Cat("'in <string>' requires string as left operand, not ", item.TypeName()));
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict() && !container.as_dict().is_namespace) {
    return item.is_string() && container.as_dict().Find(item.as_string()) != nullptr;
  }
  if (container.is_list()) {
    for (const Value& element : container.as_list().items) {
      if (element.Equals(item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;  // Undefined iterates as empty
  return absl::InvalidArgumentError(Cat("argument of type ", container.TypeName(), " is not iterable"));
}

// The `loop` variable of one iteration.
Value MakeLoopValue(const std::vector<Value>& items, size_t index) {
  auto loop = std::make_shared<Dict>();
  const auto length = static_cast<int64_t>(items.size());
  const auto i = static_cast<int64_t>(index);
  loop->items.reserve(12);
  loop->items.emplace_back("index", Value::Int(i + 1));
  loop->items.emplace_back("index0", Value::Int(i));
  loop->items.emplace_back("revindex", Value::Int(length - i));
  loop->items.emplace_back("revindex0", Value::Int(length - i - 1));
  loop->items.emplace_back("first", Value::Bool(index == 0));
  loop->items.emplace_back("last", Value::Bool(i == length - 1));
  loop->items.emplace_back("length", Value::Int(length));
  loop->items.emplace_back("depth", Value::Int(1));
  loop->items.emplace_back("depth0", Value::Int(0));
  loop->items.emplace_back("previtem", index > 0 ? items[index - 1] : Value::Undefined("there is no previous item"));
  loop->items.emplace_back("nextitem",
                           i + 1 < length ? items[index + 1] : Value::Undefined("there is no next item"));
  auto cycle = std::make_shared<Callable>();
  cycle->name = "loop.cycle";
  cycle->invoke = [index](Evaluator&, CallArgs& args) -> absl::StatusOr<Value> {
    if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
    return args.positional[index % args.positional.size()];
  };
  loop->items.emplace_back("cycle", Value::MakeCallable(std::move(cycle)));
  return Value::MakeDict(std::move(loop));
}

}  // namespace

absl::Status AtPosition(const absl::Status& status, SourcePos pos) {
  if (absl::StartsWith(status.message(), "chat template")) return status;
  return absl::Status(status.code(), Cat("chat template error at ", DescribePos(pos), ": ", status.message()));
}

absl::StatusOr<std::string> Evaluator::Render(const Body& body) {
  std::string out;
  ERNIE_ASSIGN_OR_RETURN(Flow flow, ExecBody(body, out));
  (void)flow;  // break/continue are only parsed inside loops
  return out;
}

int Evaluator::PushFrame(int parent) {
  frames_.push_back(Frame{{}, parent});
  return current_frame();
}

Value Evaluator::Lookup(const std::string& name) const {
  for (int f = current_frame(); f >= 0; f = frames_[f].parent) {
    for (const auto& [key, value] : frames_[f].vars) {
      if (key == name) return value;
    }
  }
  if (const Value* found = context_.Find(name)) return *found;
  if (std::optional<Value> global = GetGlobal(name)) return *global;
  return Value::Undefined(Cat("'", name, "' is undefined"));
}

void Evaluator::SetLocal(const std::string& name, Value value) {
  for (auto& [key, existing] : frames_.back().vars) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  frames_.back().vars.emplace_back(name, std::move(value));
}

absl::StatusOr<Evaluator::Flow> Evaluator::ExecBody(const Body& body, std::string& out) {
  for (const StmtPtr& stmt : body) {
    ERNIE_ASSIGN_OR_RETURN(Flow flow, ExecStmt(*stmt, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Evaluator::Flow> Evaluator::ExecStmt(const Stmt& stmt, std::string& out) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      out += stmt.text;
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
      out += value.ToPrintString();
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      return ExecIf(stmt, out);
    case Stmt::Kind::kFor:
      return ExecFor(stmt, out);
    case Stmt::Kind::kSet: {
      ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr));
      ERNIE_RETURN_IF_ERROR(ExecSet(stmt, std::move(value)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      std::string captured;
      ERNIE_ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.body, captured));
      ERNIE_RETURN_IF_ERROR(ExecSet(stmt, Value::String(std::move(captured))));
      return flow;
    }
    case Stmt::Kind::kMacro:
      SetLocal(stmt.name, MakeMacroValue(stmt, 0));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *stmt.expr;
      ERNIE_ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0]));
      ERNIE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1));
      args.keyword.emplace_back("caller", MakeMacroValue(stmt, current_frame()));
      ERNIE_ASSIGN_OR_RETURN(Value result, CallValue(callee, args));
      out += result.ToPrintString();
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

absl::StatusOr<Evaluator::Flow> Evaluator::ExecIf(const Stmt& stmt, std::string& out) {
  for (const IfBranch& branch : stmt.branches) {
    bool taken = true;
    if (branch.condition != nullptr) {
      ERNIE_ASSIGN_OR_RETURN(Value condition, Eval(*branch.condition));
      taken = condition.Truthy();
    }
    if (taken) return ExecBody(branch.body, out);
  }
  return Flow::kNormal;
}

absl::StatusOr<Evaluator::Flow> Evaluator::ExecFor(const Stmt& stmt, std::string& out) {
  ERNIE_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr));
  absl::StatusOr<std::vector<Value>> all_items = IterateValue(iterable);
  ERNIE_AT(stmt.expr->pos, all_items.status());
  std::vector<Value> items;
  if (stmt.filter == nullptr) {
    items = std::move(*all_items);
  } else {
    // Jinja2 filters first, so loop.length and loop.last count kept items.
    for (Value& item : *all_items) {
      PushFrame(current_frame());
      absl::Status assigned = Assign(stmt.target, item, stmt.pos);
      absl::StatusOr<Value> keep = assigned.ok() ? Eval(*stmt.filter) : absl::StatusOr<Value>(assigned);
      PopFrame();
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) items.push_back(std::move(item));
    }
  }
  if (items.empty()) return ExecBody(stmt.else_body, out);
  for (size_t i = 0; i < items.size(); ++i) {
    PushFrame(current_frame());
    absl::Status assigned = Assign(stmt.target, items[i], stmt.pos);
    if (!assigned.ok()) {
      PopFrame();
      return assigned;
    }
    SetLocal("loop", MakeLoopValue(items, i));
    absl::StatusOr<Flow> flow = ExecBody(stmt.body, out);
    PopFrame();
    if (!flow.ok()) return flow.status();
    if (*flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

absl::Status Evaluator::Assign(const AssignTarget& target, const Value& value, SourcePos pos) {
  if (!target.is_tuple) {
    SetLocal(target.names[0], value);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Value>> parts = IterateValue(value);
  if (!parts.ok() || value.is_undefined()) {
    return ErrorAt(pos, Cat("cannot unpack non-iterable ", value.TypeName()));
  }
  if (parts->size() != target.names.size()) {
    return ErrorAt(pos, Cat(parts->size() < target.names.size() ? "not enough" : "too many",
                                     " values to unpack (expected ", target.names.size(), ", got ", parts->size(), ")"));
  }
  for (size_t i = 0; i < parts->size(); ++i) SetLocal(target.names[i], (*parts)[i]);
  return absl::OkStatus();
}

absl::Status Evaluator::ExecSet(const Stmt& stmt, Value value) {
  const AssignTarget& target = stmt.target;
  if (target.attribute.empty()) return Assign(target, value, stmt.pos);
  const Value object = Lookup(target.names[0]);
  if (!object.is_dict() || !object.as_dict().is_namespace) {
    return ErrorAt(stmt.pos, Cat("cannot assign attribute on non-namespace object '", target.names[0], "'"));
  }
  object.mutable_dict().Set(target.attribute, std::move(value));
  return absl::OkStatus();
}

Value Evaluator::MakeMacroValue(const Stmt& macro, int parent_frame) {
  auto callable = std::make_shared<Callable>();
  callable->name = macro.kind == Stmt::Kind::kMacro ? macro.name : "caller";
  const Stmt* node = &macro;  // owned by the template, which outlives the render
  callable->invoke = [node, parent_frame](Evaluator& evaluator, CallArgs& args) {
    return evaluator.InvokeMacro(*node, args, parent_frame);
  };
  return Value::MakeCallable(std::move(callable));
}

absl::StatusOr<Value> Evaluator::InvokeMacro(const Stmt& macro, CallArgs& args, int parent_frame) {
  const std::string name = macro.kind == Stmt::Kind::kMacro ? macro.name : "caller";
  if (macro_depth_ >= kMaxMacroDepth) {
    return ErrorAt(args.pos, Cat("macro '", name, "' nested deeper than ", kMaxMacroDepth, " calls"));
  }
  if (args.positional.size() > macro.params.size()) {
    return ErrorAt(args.pos, Cat("macro '", name, "' takes not more than ", macro.params.size(),
                                          " argument(s)"));
  }
  std::vector<const Value*> bound(macro.params.size(), nullptr);
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = &args.positional[i];
  const Value* caller = nullptr;
  for (const auto& [key, value] : args.keyword) {
    bool matched = false;
    for (size_t i = 0; i < macro.params.size(); ++i) {
      if (macro.params[i].name == key) {
        if (bound[i] != nullptr) {
          return ErrorAt(args.pos, Cat("macro '", name, "' got multiple values for argument '", key, "'"));
        }
        bound[i] = &value;
        matched = true;
      }
    }
    if (!matched && key == "caller") {
      caller = &value;
    } else if (!matched) {
      return ErrorAt(args.pos, Cat("macro '", name, "' takes no keyword argument '", key, "'"));
    }
  }
  PushFrame(parent_frame);
  ++macro_depth_;
  absl::Status status;
  for (size_t i = 0; i < macro.params.size() && status.ok(); ++i) {
    const MacroParam& param = macro.params[i];
    if (bound[i] != nullptr) {
      SetLocal(param.name, *bound[i]);
    } else if (param.default_value != nullptr) {
      absl::StatusOr<Value> value = Eval(*param.default_value);
      if (value.ok()) {
        SetLocal(param.name, *std::move(value));
      } else {
        status = value.status();
      }
    } else {
      SetLocal(param.name, Value::Undefined(Cat("parameter '", param.name, "' was not provided")));
    }
  }
  if (caller != nullptr) SetLocal("caller", *caller);
  std::string out;
  if (status.ok()) {
    absl::StatusOr<Flow> flow = ExecBody(macro.body, out);
    status = flow.status();
  }
  --macro_depth_;
  PopFrame();
  ERNIE_RETURN_IF_ERROR(status);
  return Value::String(std::move(out));
}

absl::StatusOr<CallArgs> Evaluator::EvalArgs(const Expr& expr, size_t first_positional) {
  CallArgs args;
  args.pos = expr.pos;
  for (size_t i = first_positional; i < expr.args.size(); ++i) {
    ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i]));
    args.positional.push_back(std::move(value));
  }
  for (const auto& [key, value_expr] : expr.kwargs) {
    ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*value_expr));
    args.keyword.emplace_back(key, std::move(value));
  }
  return args;
}

absl::StatusOr<Value> Evaluator::CallValue(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) return AtPosition(UndefinedError(callee), args.pos);
  if (!callee.is_callable()) return ErrorAt(args.pos, Cat(callee.TypeName(), " is not callable"));
  absl::StatusOr<Value> result = callee.as_callable().invoke(*this, args);
  if (!result.ok()) return AtPosition(result.status(), args.pos);
  return result;
}

absl::StatusOr<Value> Evaluator::EvalCall(const Expr& expr) {
  ERNIE_ASSIGN_OR_RETURN(Value callee, Eval(*expr.args[0]));
  ERNIE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
  return CallValue(callee, args);
}

absl::StatusOr<Value> Evaluator::EvalCompare(const Expr& expr) {
  ERNIE_ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    ERNIE_ASSIGN_OR_RETURN(Value right, Eval(*expr.args[i + 1]));
    const std::string& op = expr.ops[i];
    bool result = false;
    if (op == "==" || op == "!=") {
      result = left.Equals(right) == (op == "==");
    } else if (op == "in" || op == "not in") {
      absl::StatusOr<bool> contained = Contains(right, left);
      ERNIE_AT(expr.pos, contained.status());
      result = *contained == (op == "in");
    } else {
      CallArgs other;
      other.positional.push_back(right);
      absl::StatusOr<bool> ordered = ApplyTest(op, left, other);
      ERNIE_AT(expr.pos, ordered.status());
      result = *ordered;
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Evaluator::Eval(const Expr& expr) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName:
      return Lookup(expr.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.args.size());
      for (const ExprPtr& item : expr.args) {
        ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*item));
        items.push_back(std::move(value));
      }
      return Value::MakeList(std::move(items), expr.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      auto dict = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        ERNIE_ASSIGN_OR_RETURN(Value key, Eval(*expr.args[i]));
        if (!key.is_string()) return ErrorAt(expr.args[i]->pos, "dict keys must be strings in chat templates");
        ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i + 1]));
        dict->Set(key.as_string(), std::move(value));
      }
      return Value::MakeDict(std::move(dict));
    }
    case Expr::Kind::kGetAttr: {
      ERNIE_ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
      absl::StatusOr<Value> result = GetAttribute(object, expr.name);
      ERNIE_AT(expr.pos, result.status());
      return result;
    }
    case Expr::Kind::kGetItem: {
      ERNIE_ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
      ERNIE_ASSIGN_OR_RETURN(Value key, Eval(*expr.args[1]));
      absl::StatusOr<Value> result = GetItem(object, key);
      ERNIE_AT(expr.pos, result.status());
      return result;
    }
    case Expr::Kind::kSlice: {
      ERNIE_ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0]));
      Value bounds[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (expr.args[i + 1] != nullptr) {
          ERNIE_ASSIGN_OR_RETURN(bounds[i], Eval(*expr.args[i + 1]));
        }
      }
      absl::StatusOr<Value> result = SliceValue(object, bounds[0], bounds[1], bounds[2]);
      ERNIE_AT(expr.pos, result.status());
      return result;
    }
    case Expr::Kind::kCall:
      return EvalCall(expr);
    case Expr::Kind::kFilter: {
      ERNIE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0]));
      ERNIE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
      absl::StatusOr<Value> result = ApplyFilter(expr.name, operand, args);
      ERNIE_AT(expr.pos, result.status());
      return result;
    }
    case Expr::Kind::kTest: {
      ERNIE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0]));
      ERNIE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1));
      absl::StatusOr<bool> result = ApplyTest(expr.name, operand, args);
      ERNIE_AT(expr.pos, result.status());
      return Value::Bool(*result != expr.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      ERNIE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0]));
      if (operand.is_undefined()) return AtPosition(UndefinedError(operand), expr.pos);
      if (!operand.is_number()) {
        return ErrorAt(expr.pos, Cat("bad operand type for unary ", expr.kind == Expr::Kind::kNeg ? "-" : "+",
                                              ": ", operand.TypeName()));
      }
      if (expr.kind == Expr::Kind::kPos) return operand.is_bool() ? Value::Int(operand.as_int()) : operand;
      if (operand.is_float()) return Value::Float(-operand.as_float());
      if (operand.as_int() == INT64_MIN) return AtPosition(IntegerOverflow("-"), expr.pos);
      return Value::Int(-operand.as_int());
    }
    case Expr::Kind::kNot: {
      ERNIE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0]));
      return Value::Bool(!operand.Truthy());
    }
    case Expr::Kind::kBinary: {
      ERNIE_ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
      ERNIE_ASSIGN_OR_RETURN(Value right, Eval(*expr.args[1]));
      absl::StatusOr<Value> result = Arithmetic(expr.name, left, right);
      ERNIE_AT(expr.pos, result.status());
      return result;
    }
    case Expr::Kind::kCompare:
      return EvalCompare(expr);
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      // Python returns the deciding operand itself, not a bool.
      ERNIE_ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
      if (left.Truthy() == (expr.kind == Expr::Kind::kOr)) return left;
      return Eval(*expr.args[1]);
    }
    case Expr::Kind::kConcat: {
      std::string out;
      for (const ExprPtr& part : expr.args) {
        ERNIE_ASSIGN_OR_RETURN(Value value, Eval(*part));
        out += value.ToPrintString();
      }
      return Value::String(std::move(out));
    }
    case Expr::Kind::kConditional: {
      ERNIE_ASSIGN_OR_RETURN(Value condition, Eval(*expr.args[1]));
      if (condition.Truthy()) return Eval(*expr.args[0]);
      if (expr.args[2] != nullptr) return Eval(*expr.args[2]);
      return Value::Undefined("the inline if-expression evaluated to false and no else section was defined");
    }
  }
  return ErrorAt(expr.pos, "unknown expression");
}

}  // namespace ernie::chat_template
