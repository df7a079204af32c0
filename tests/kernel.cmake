# Kernel-level tests: the L2 top against the plain reference, the sparse format, the rules
# against double precision, and the argument table against the HLS source.
add_library(csdkit_test_util STATIC ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cpp)
target_link_libraries(csdkit_test_util PUBLIC csdkit_platform csdkit_runtime)
target_include_directories(csdkit_test_util PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(csdkit_test_util PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

foreach(t kernel_test datapath_test sparse_test rules_test args_table_test)
  csdkit_test(${t})
  target_link_libraries(${t} PRIVATE csdkit_test_util)
  gtest_discover_tests(${t} PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
endforeach()
target_compile_definitions(args_table_test PRIVATE
  CSDKIT_KERNEL_SOURCE="${PROJECT_SOURCE_DIR}/hls/kernels/csd_update.cpp")

add_test(NAME args_table_doc
         COMMAND ${CMAKE_COMMAND} -DCSDKIT=$<TARGET_FILE:csdkit>
                 -DDOC=${PROJECT_SOURCE_DIR}/docs/kernel-interface.md
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/args_doc_check.cmake)
set_tests_properties(args_table_doc PROPERTIES LABELS quick)

# A launch larger than the machine's available memory is refused before anything is allocated
# (2^32 - 1 fp32 elements of AdamW need 64 GiB), with exit status 2.
add_test(NAME cli_kernel_refuses_more_than_memory
         COMMAND csdkit kernel --n 4294967295 --grad fp32 --out none)
set_tests_properties(cli_kernel_refuses_more_than_memory PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "expected a launch that fits in memory; it needs [0-9.]+ GiB")
