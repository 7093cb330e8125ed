#pragma once

#include <cstdio>
#include <cstdlib>

/// @brief Aborts with file:line when an internal invariant fails. Not for user errors: those
/// travel as corun::Error values.
#define CORUN_CHECK(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)

#define CORUN_CHECK_MSG(cond, msg)                                                         \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #cond,    \
                   msg);                                                                   \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)
