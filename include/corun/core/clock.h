#pragma once

// Wall-clock time as corun records it: what a record says of when it was made, never what a
// plan or a measurement depends on (those run on the simulator's or the controller's clock).

#include <cstdint>
#include <string>

namespace corun {

/// @brief Milliseconds since the Unix epoch, now.
std::int64_t unix_now_ms();

/// @brief Now in UTC as RFC 3339 to the second ("2026-12-07T01:02:03Z"), the format of
/// Kubernetes' metav1.Time and of the dataset's timestamps.
std::string utc_now_rfc3339();

/// @brief The same to the millisecond ("2026-12-07T01:02:03.456Z"): when serve made a plan.
std::string utc_now_rfc3339_ms();

}  // namespace corun
