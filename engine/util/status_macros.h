// Status propagation helpers. Debian's abseil (20220623) ships no
// RETURN_IF_ERROR / ASSIGN_OR_RETURN macros, so the project defines them once.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ERNIE_STATUS_CONCAT_INNER_(a, b) a##b
#define ERNIE_STATUS_CONCAT_(a, b) ERNIE_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define ERNIE_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::absl::Status ernie_status_ = (expr);          \
    if (!ernie_status_.ok()) return ernie_status_;  \
  } while (false)

// `ERNIE_ASSIGN_OR_RETURN(auto x, MakeX());` declares/assigns x from an
// absl::StatusOr, or returns its error status from the enclosing function.
#define ERNIE_ASSIGN_OR_RETURN(lhs, expr) \
  ERNIE_ASSIGN_OR_RETURN_IMPL_(ERNIE_STATUS_CONCAT_(ernie_statusor_, __LINE__), lhs, expr)

#define ERNIE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
