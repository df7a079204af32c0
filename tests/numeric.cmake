# Numeric building blocks: fp16/bf16 conversions (fp16.h) and binary32 operations (fp32.h).
# Included by tests/CMakeLists.txt; labels: quick (CI), exhaustive (2^32 sweeps).

csdkit_test(fp16_test)
add_test(NAME fp16_test COMMAND fp16_test)
set_tests_properties(fp16_test PROPERTIES LABELS "quick;numeric" TIMEOUT 300)

csdkit_test(fp32_test)
add_test(NAME fp32_test COMMAND fp32_test)
set_tests_properties(fp32_test PROPERTIES LABELS "quick;numeric" TIMEOUT 300)

# The 2^32 sweeps of F32ToF16 / F32ToBf16: the same source with CSDKIT_FP16_EXHAUSTIVE, which
# compiles only the exhaustive tests. csdkit_test() takes its source from the target name, so
# this target copies fp16_test's compile options and link libraries instead (the same model
# flags, kept in one place) and adds Threads for the std::thread shards.
add_executable(fp16_exhaustive_test fp16_test.cpp)
get_target_property(_csdkit_fp16_opts fp16_test COMPILE_OPTIONS)
get_target_property(_csdkit_fp16_libs fp16_test LINK_LIBRARIES)
target_compile_options(fp16_exhaustive_test PRIVATE ${_csdkit_fp16_opts})
target_link_libraries(fp16_exhaustive_test PRIVATE ${_csdkit_fp16_libs} Threads::Threads)
target_compile_definitions(fp16_exhaustive_test PRIVATE CSDKIT_FP16_EXHAUSTIVE=1)
add_test(NAME fp16_exhaustive_test COMMAND fp16_exhaustive_test)
set_tests_properties(fp16_exhaustive_test PROPERTIES LABELS "exhaustive;numeric" TIMEOUT 1800)

# The compressed state formats' numeric core (csdkit/hls/state_q8.h) against the independent
# numpy reference's golden vectors, written at build time by tests/reference/state_formats.py.
if(EXISTS /usr/bin/python3)
  set(_csdkit_q8_vectors ${CMAKE_CURRENT_BINARY_DIR}/state_q8_vectors.bin)
  add_custom_command(
    OUTPUT ${_csdkit_q8_vectors}
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/reference/state_formats.py
            --vectors ${_csdkit_q8_vectors}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/reference/state_formats.py
    COMMENT "Golden vectors of the q8 state formats (the numpy reference)")
  add_custom_target(state_q8_vectors DEPENDS ${_csdkit_q8_vectors})
  csdkit_test(state_q8_test)
  add_dependencies(state_q8_test state_q8_vectors)
  target_compile_definitions(state_q8_test PRIVATE CSDKIT_Q8_VECTORS="${_csdkit_q8_vectors}")
  add_test(NAME state_q8_test COMMAND state_q8_test)
  set_tests_properties(state_q8_test PROPERTIES LABELS "quick;numeric" TIMEOUT 120)
endif()
