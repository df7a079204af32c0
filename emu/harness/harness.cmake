# csdkit_harness: the Verilator simulation harness of emu/harness (simulation owner, AXI4 memory
# slave, AXI4-Lite master, ap_ctrl driver, bench helpers). Plain C++: it does not include
# Verilator's headers, so it builds without Verilator; a bench adds verilated_dut.h (header-only)
# and links its Verilated model. Included from rtl/axi.cmake.
include_guard(GLOBAL)

set(CSDKIT_HARNESS_DIR "${CMAKE_CURRENT_LIST_DIR}")
add_library(csdkit_harness STATIC
  "${CSDKIT_HARNESS_DIR}/src/sim.cpp"
  "${CSDKIT_HARNESS_DIR}/src/memory_map.cpp"
  "${CSDKIT_HARNESS_DIR}/src/axi_mem_slave.cpp"
  "${CSDKIT_HARNESS_DIR}/src/axil_master.cpp"
  "${CSDKIT_HARNESS_DIR}/src/ap_ctrl.cpp"
  "${CSDKIT_HARNESS_DIR}/src/bench.cpp")
target_include_directories(csdkit_harness PUBLIC "${CSDKIT_HARNESS_DIR}/include")
# The argument tables (update_args.h) come from the L1 headers.
target_link_libraries(csdkit_harness PUBLIC csdkit_hls)
target_compile_features(csdkit_harness PUBLIC cxx_std_17)
target_compile_options(csdkit_harness PRIVATE -O2 -Wall -Wextra)
set_target_properties(csdkit_harness PROPERTIES POSITION_INDEPENDENT_CODE ON)

# Self-test of the harness (no Verilator needed): the memory slave's data path and every rule it
# enforces, MemoryMap, Sim timeouts and flags, AXI4-Lite master and ApCtrl.
if(CSDKIT_BUILD_TESTS)
  find_package(GTest QUIET)
endif()
if(CSDKIT_BUILD_TESTS AND TARGET GTest::gtest_main)
  enable_testing()
  add_executable(emu_harness_test "${CSDKIT_HARNESS_DIR}/test/harness_test.cpp")
  target_link_libraries(emu_harness_test PRIVATE csdkit_harness GTest::gtest GTest::gtest_main)
  target_compile_options(emu_harness_test PRIVATE -O2 -Wall -Wextra)
  add_test(NAME emu_harness_test COMMAND emu_harness_test)
  set_tests_properties(emu_harness_test PROPERTIES LABELS "quick;emu" TIMEOUT 120)
endif()
