# The serve layer: the scheduler as an HTTP/JSON service (docs/serve.md), its load tool and the
# serving-loop example. cpp-httplib comes through pkg-config (see the mapping layer).
if(NOT TARGET PkgConfig::CPP_HTTPLIB)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
endif()
corun_add_layer(serve corun_runtime corun_mapping SQLite::SQLite3 nlohmann_json::nlohmann_json
                PkgConfig::CPP_HTTPLIB Threads::Threads yaml-cpp)
# docs/openapi.yaml is compiled in: `GET /v1/openapi.json` serves it as JSON.
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/generated/openapi_text.cc
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/docs/openapi.yaml
          -DOUT=${CMAKE_BINARY_DIR}/generated/openapi_text.cc -DNAMESPACE=corun::serve
          -DFUNCTION=openapi_yaml -P ${CMAKE_SOURCE_DIR}/cmake/EmbedText.cmake
  DEPENDS ${CMAKE_SOURCE_DIR}/docs/openapi.yaml ${CMAKE_SOURCE_DIR}/cmake/EmbedText.cmake
  COMMENT "Embedding docs/openapi.yaml"
  VERBATIM)
target_sources(corun_serve PRIVATE ${CMAKE_BINARY_DIR}/generated/openapi_text.cc)
target_link_libraries(corun PRIVATE corun_serve)

# Load client for `make bench` (docs/results/serve.md); not part of the test suite.
add_executable(corun_serve_load ${CMAKE_SOURCE_DIR}/bench/serve_load.cc)
corun_set_warnings(corun_serve_load)
target_link_libraries(corun_serve_load PRIVATE corun_serve)

# examples/serving-loop: a serving stack's side of the API, on the sim testbed.
add_executable(corun_serving_loop ${CMAKE_SOURCE_DIR}/examples/serving-loop/serving_loop.cc)
corun_set_warnings(corun_serving_loop)
target_link_libraries(corun_serving_loop PRIVATE corun_serve)

# The serve tests start the real binary (kill -9 and restart). Sanitizer presets build only the
# in-process part, so the dependency is added for full test builds only.
function(corun_serve_test_deps)
  if(TARGET corun_serve_tests AND CORUN_TEST_LAYERS STREQUAL "all")
    add_dependencies(corun_serve_tests corun)
  endif()
endfunction()
cmake_language(DEFER CALL corun_serve_test_deps)
