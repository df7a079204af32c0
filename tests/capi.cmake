# The C API (host/capi): error paths, the same steps as the C++ API bit for bit, found_inf.
csdkit_test(capi_test)
target_link_libraries(capi_test PRIVATE csdkit_c csdkit_runtime csdkit_system)
target_compile_definitions(capi_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/capi_test_stores")
gtest_discover_tests(capi_test TEST_PREFIX "capi_test." PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)
