// The syntax tree of a parsed chat template. Nodes are immutable after
// parsing, so one tree serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/tokenizer/template/value.h"

namespace ernie::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,      // literal
    kName,         // name
    kList,         // args: elements
    kTuple,        // args: elements
    kDict,         // args: key0, value0, key1, value1, ...
    kGetAttr,      // args[0].name
    kGetItem,      // args[0][args[1]]
    kSlice,        // args[0][args[1]:args[2]:args[3]], each bound may be null
    kCall,         // args[0](args[1..], kwargs)
    kFilter,       // args[0] | name(args[1..], kwargs)
    kTest,         // args[0] is [not] name(args[1..], kwargs)
    kNeg,          // -args[0]
    kPos,          // +args[0]
    kNot,          // not args[0]
    kBinary,       // args[0] name args[1], name one of + - * / // % **
    kCompare,      // args[0] ops[0] args[1] ops[1] args[2] ...
    kAnd,          // args[0] and args[1]
    kOr,           // args[0] or args[1]
    kConcat,       // args[0] ~ args[1] ~ ...
    kConditional,  // args[0] if args[1] else args[2] (args[2] may be null)
  };

  Kind kind = Kind::kLiteral;
  SourcePos pos;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;  // `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A branch of an if statement; `condition` is null for else.
struct IfBranch {
  ExprPtr condition;
  Body body;
};

// Where a set statement or loop stores a value: a name, ns.attr, or a
// tuple of names to unpack into.
struct AssignTarget {
  std::vector<std::string> names;  // one name, or the names of a tuple
  std::string attribute;           // non-empty for `set ns.attr = ...`
  bool is_tuple = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: undefined when not passed
};

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // branches
    kFor,        // for target in expr [if filter]: body / else_body
    kSet,        // set target = expr
    kSetBlock,   // set target: body
    kMacro,      // macro name(params): body
    kCallBlock,  // call(params) expr: body (becomes `caller`)
    kBreak,
    kContinue,
  };

  Kind kind = Kind::kText;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  std::vector<IfBranch> branches;
  AssignTarget target;
  ExprPtr filter;
  Body body;
  Body else_body;
  std::string name;
  std::vector<MacroParam> params;
};

}  // namespace ernie::chat_template
