# The OpenCL backend on PoCL (or any OpenCL platform present).
csdkit_test(opencl_test)
target_link_libraries(opencl_test PRIVATE csdkit_system csdkit_runtime csdkit_test_util)
target_compile_definitions(opencl_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/opencl_test_stores")
gtest_discover_tests(opencl_test PROPERTIES LABELS quick TIMEOUT 900 COST 12 DISCOVERY_TIMEOUT 60)
