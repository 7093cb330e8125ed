function(corun_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wconversion -Wno-sign-conversion)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 at -O3 reports -Wrestrict inside libstdc++ for `"text" + std::string` (GCC bug
    # 105651, fixed in 13): a false positive in the standard library, not in corun.
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Clang checks the lock annotations of core/mutex.h (GUARDED_BY, REQUIRES, ...).
    target_compile_options(${target} PRIVATE -Wthread-safety)
  endif()
  if(CORUN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
