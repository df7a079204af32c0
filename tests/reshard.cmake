# Reshard of a set of rank stores (csdkit/runtime/reshard.h) and `csdkit reshard`: the sets are
# made by the test with the runtime API, so no Python is needed; the command's cases run the
# built csdkit.
csdkit_test(reshard_test)
target_link_libraries(reshard_test PRIVATE csdkit_runtime)
add_dependencies(reshard_test csdkit)
target_compile_definitions(reshard_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/reshard_test_stores"
  CSDKIT_CLI="$<TARGET_FILE:csdkit>")
gtest_discover_tests(reshard_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)
