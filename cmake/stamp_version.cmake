# Writes OUT from the version template with the git hash of HEAD as it is now. Run at every
# build (CMakeLists.txt, target corun_version), so that the hash corun stamps into its reports
# follows commits made after the build directory was configured; configure_file leaves OUT
# untouched when the text is the same, so an unchanged HEAD rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE CORUN_GIT_HASH
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT CORUN_GIT_HASH)
  set(CORUN_GIT_HASH "unknown")
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${TEMPLATE} ${OUT} @ONLY)
