# The libaio storage engine: round trips over block sizes, queue depths and modes; alignment
# checks; end of file; every kernel failure injected under the engine (fault_injection.h);
# DeepSpeed `aio` config parsing. Files go to a directory on the build tree's filesystem (tmpfs
# may not do O_DIRECT); set CSDKIT_AIO_TEST_DIR to use another disk-backed directory. Test
# names start with "aio." (ctest -R aio).
csdkit_test(aio_test)
target_link_libraries(aio_test PRIVATE csdkit_aio)
target_compile_definitions(aio_test PRIVATE
  CSDKIT_AIO_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/aio_tmp")
gtest_discover_tests(aio_test TEST_PREFIX "aio." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
