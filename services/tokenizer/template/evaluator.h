// Runs a parsed template for one render. An Evaluator is single-use and
// single-threaded; the tree it walks is shared and never modified.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/tokenizer/template/ast.h"
#include "services/tokenizer/template/value.h"

namespace ernie::chat_template {

class Evaluator {
 public:
  // `context` holds the render's variables (messages, bos_token, ...).
  explicit Evaluator(const Dict& context) : context_(context) { frames_.push_back(Frame{{}, -1}); }

  absl::StatusOr<std::string> Render(const Body& body);

  // Calls a macro: a fresh scope over the template's top level (or over
  // `parent_frame` for a call block's caller), output captured as a string.
  absl::StatusOr<Value> InvokeMacro(const Stmt& macro, CallArgs& args, int parent_frame);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    int parent;  // enclosing frame for lookups, -1 at the top level
  };

  absl::StatusOr<Flow> ExecBody(const Body& body, std::string& out);
  absl::StatusOr<Flow> ExecStmt(const Stmt& stmt, std::string& out);
  absl::StatusOr<Flow> ExecIf(const Stmt& stmt, std::string& out);
  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, std::string& out);
  absl::Status ExecSet(const Stmt& stmt, Value value);
  absl::Status Assign(const AssignTarget& target, const Value& value, SourcePos pos);
  Value MakeMacroValue(const Stmt& macro, int parent_frame);

  absl::StatusOr<Value> Eval(const Expr& expr);
  absl::StatusOr<Value> EvalCall(const Expr& expr);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& expr, size_t first_positional);
  absl::StatusOr<Value> EvalBinary(const Expr& expr);
  absl::StatusOr<Value> EvalCompare(const Expr& expr);
  absl::StatusOr<Value> CallValue(const Value& callee, CallArgs& args);

  Value Lookup(const std::string& name) const;
  void SetLocal(const std::string& name, Value value);
  int PushFrame(int parent);
  void PopFrame() { frames_.pop_back(); }
  int current_frame() const { return static_cast<int>(frames_.size()) - 1; }

  const Dict& context_;
  std::vector<Frame> frames_;  // scopes; frame 0 is the template's top level
  int macro_depth_ = 0;        // nested macro calls, bounded against runaway recursion
};

// Prefixes an error with its position unless it already names one.
absl::Status AtPosition(const absl::Status& status, SourcePos pos);

}  // namespace ernie::chat_template
