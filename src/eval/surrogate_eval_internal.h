#pragma once

// Constants shared by the surrogate evaluation's files (surrogate_eval.cc and the report files
// split from it). Private to src/eval.

namespace corun::eval::detail {

// The accuracy goals a co-run budget is measured against: pooled R^2 >= 0.95 (the issue's
// criterion) and the stricter macro R^2 >= 0.90.
inline constexpr double kR2Goal = 0.95;
inline constexpr double kMacroGoal = 0.90;

}  // namespace corun::eval::detail
