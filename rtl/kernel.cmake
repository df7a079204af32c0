# The updater kernel's RTL top `csd_update` (the Vitis port wrapper generated into the build tree
# by axi.cmake, around rtl/kernels/updater/csd_update_kernel.sv: control slave, AXI masters,
# core) Verilated twice — IEEE and FTZ/DAZ builds — into one library with the C++ launcher that
# runs it behind the emulation harness (emu/rtl/rtl_kernel.cpp). The emulated SmartSSD's `rtl`
# backend, `csdkit verify` and `csdkit bench rtl` use it. Needs rtl.cmake, axi.cmake and
# updater.cmake (included before this file).
if(NOT CSD_UPD_ALL_SOURCES OR NOT CSD_AXI_SOURCES OR NOT TARGET csdkit_harness)
  message(STATUS "csdkit: RTL kernel not built (needs Verilator and the RTL sources)")
  return()
endif()

# FST tracing is compiled in (it costs nothing until a trace is opened: --trace / CSDKIT_TRACE).
set(CSDKIT_KERNEL_TRACE TRACE_FST)
# csd_update_bundle_mux (two masters per bundle: gmem1 m + m_absmax, gmem2 v + v_absmax) needs
# csd_axi_pkg, so it is the kernel's source rather than one of updater.cmake's core modules.
set(csd_kernel_sources ${CSD_UPD_ALL_SOURCES} ${CSD_AXI_SOURCES} ${CSD_UPDATE_ARGS_PKG}
    "${CSD_UPD_DIR}/csd_update_bundle_mux.sv" ${CSD_UPDATE_CORE} ${CSD_UPDATE_WRAPPER})
list(REMOVE_DUPLICATES csd_kernel_sources)
set(csd_kernel_vlt ${CMAKE_CURRENT_LIST_DIR}/lint/csd.vlt)

add_library(csdkit_rtl_kernel STATIC ${PROJECT_SOURCE_DIR}/emu/rtl/rtl_kernel.cpp)
add_dependencies(csdkit_rtl_kernel csd_rtl_q8_tables_pkg)
set_target_properties(csdkit_rtl_kernel PROPERTIES POSITION_INDEPENDENT_CODE ON)
foreach(policy ieee ftz)
  set(ftz_bit 0)
  if(policy STREQUAL "ftz")
    set(ftz_bit 1)
  endif()
  # OPT_FAST -O1: the evaluation code compiles in about half the time of -O2 (467 -> 256 CPU-s
  # for both policies on two AMD EPYC cores) and the kernel's RTL tests ran no slower (the
  # back-pressure sweep 106 s against 119 s at -O2).
  verilate(csdkit_rtl_kernel ${CSDKIT_KERNEL_TRACE}
           PREFIX Vcsd_update_${policy}
           TOP_MODULE csd_update
           THREADS 1
           SOURCES ${csd_kernel_sources}
           VERILATOR_ARGS -Wall --x-assign fast --x-initial unique ${csd_kernel_vlt}
                          "-GFtzDaz=1'b${ftz_bit}"
           OPT_FAST -O1
           OPT_SLOW -O1
           OPT_GLOBAL -O2)
endforeach()
# The trace functions run only while a trace is open (--trace): they are compiled unoptimised,
# which takes a third of the time of -O2 for the ~26 MB of them per policy and slows only a
# traced run.
get_target_property(csd_kernel_all_sources csdkit_rtl_kernel SOURCES)
list(FILTER csd_kernel_all_sources INCLUDE REGEX "__Trace__[0-9]+(__Slow)?\\.cpp$")
set_property(SOURCE ${csd_kernel_all_sources} APPEND_STRING PROPERTY COMPILE_FLAGS " -O0")
add_dependencies(csdkit_rtl_kernel csd_rtl_axi_args_pkgs)
target_include_directories(csdkit_rtl_kernel PUBLIC ${PROJECT_SOURCE_DIR}/emu/include)
target_include_directories(csdkit_rtl_kernel SYSTEM PRIVATE "${VERILATOR_ROOT}/include")
target_link_libraries(csdkit_rtl_kernel PUBLIC csdkit_harness csdkit_hls csdkit_platform nlohmann_json::nlohmann_json)
target_compile_definitions(csdkit_rtl_kernel PRIVATE VM_TRACE=1 VM_TRACE_FST=1)
target_compile_options(csdkit_rtl_kernel PRIVATE -O2 -Wno-unknown-pragmas)

# The emulated device's rtl backend.
target_link_libraries(csdkit_emu PUBLIC csdkit_rtl_kernel)
target_compile_definitions(csdkit_emu PRIVATE CSDKIT_HAVE_RTL=1)

# Lint of the whole kernel: the generated top (both policies) and the hand-written core. The
# build above Verilates the generated top in both policies with the same -Wall and waivers (a
# warning fails the build), so its two lints (20 s each) are nightly only.
add_test(NAME rtl_lint_csd_update
         COMMAND ${CSDKIT_VERILATOR_EXE} --lint-only -Wall ${csd_kernel_vlt} ${csd_kernel_sources}
                 --top-module csd_update)
set_tests_properties(rtl_lint_csd_update PROPERTIES LABELS "nightly;rtl;lint" TIMEOUT 300)
add_test(NAME rtl_lint_csd_update_ftz
         COMMAND ${CSDKIT_VERILATOR_EXE} --lint-only -Wall ${csd_kernel_vlt} ${csd_kernel_sources}
                 --top-module csd_update "-GFtzDaz=1'b1")
set_tests_properties(rtl_lint_csd_update_ftz PROPERTIES LABELS "nightly;rtl;lint" TIMEOUT 300)
add_test(NAME rtl_lint_csd_update_bundle_mux
         COMMAND ${CSDKIT_VERILATOR_EXE} --lint-only -Wall ${csd_kernel_vlt} ${csd_kernel_sources}
                 --top-module csd_update_bundle_mux)
set_tests_properties(rtl_lint_csd_update_bundle_mux PROPERTIES LABELS "quick;rtl;lint"
                     TIMEOUT 300)
add_test(NAME rtl_lint_csd_update_kernel
         COMMAND ${CSDKIT_VERILATOR_EXE} --lint-only -Wall ${csd_kernel_vlt} ${csd_kernel_sources}
                 --top-module csd_update_kernel)
set_tests_properties(rtl_lint_csd_update_kernel PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 300)

# Kernel-level tests: RTL through AXI vs the host model, malformed streams, runtime on rtl devices
# (GoogleTest and the tests' reference: built with the tests, CSDKIT_BUILD_TESTS).
if(NOT TARGET csdkit_test_util)
  return()
endif()
add_executable(rtl_kernel_test ${PROJECT_SOURCE_DIR}/tests/rtl_kernel_test.cpp)
target_link_libraries(rtl_kernel_test PRIVATE csdkit_test_util csdkit_runtime csdkit_system csdkit_platform
                      GTest::gtest GTest::gtest_main)
target_compile_options(rtl_kernel_test PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)
target_compile_definitions(rtl_kernel_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_BINARY_DIR}/tests/rtl_kernel_test_stores")
# COST: seven tests of 10-120 s, started before the short ones (ctest's order without cost data).
# gtest_discover_tests flattens a list-valued property into its arguments (CMake 3.25: LABELS
# "quick;rtl" became LABELS quick and a stray "rtl" that swallowed what followed), and ctest adds
# labels up rather than replacing them, so every label is set by a file ctest includes after the
# discovered tests: quick and rtl, but the back-pressure sweep's second memory seed (75 s) and
# the q8 formats at more sizes, nightly and rtl.
gtest_discover_tests(rtl_kernel_test TEST_LIST csd_rtl_kernel_tests
                     PROPERTIES TIMEOUT 1500 COST 100 DISCOVERY_TIMEOUT 120)
set(csd_rtl_nightly "EveryConfigurationBitExactUnderBackPressureSecondSeed")
string(APPEND csd_rtl_nightly "|Q8FormatsBitExactUnderBackPressureMoreSizes")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/rtl_kernel_test_labels.cmake
     "foreach(t IN LISTS csd_rtl_kernel_tests)\n"
     "  if(t MATCHES \"^Rtl[.](${csd_rtl_nightly})\$\")\n"
     "    set_tests_properties(\${t} PROPERTIES LABELS \"nightly;rtl\")\n"
     "  else()\n"
     "    set_tests_properties(\${t} PROPERTIES LABELS \"quick;rtl\")\n"
     "  endif()\n"
     "endforeach()\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
             ${CMAKE_CURRENT_BINARY_DIR}/rtl_kernel_test_labels.cmake)

# --trace writes a waveform in both policies' builds: an FST file (its header block is type 0)
# of more than the header alone, from a launch that still equals the model.
foreach(policy ieee ftz)
  set(flag "")
  if(policy STREQUAL "ftz")
    set(flag "--ftz")
  endif()
  add_test(NAME rtl_kernel_trace_${policy} COMMAND sh -c
    "d='${CMAKE_CURRENT_BINARY_DIR}/tests/rtl_trace_${policy}' && rm -rf \"$d\" && mkdir -p \"$d\" && \
     '$<TARGET_FILE:csdkit>' kernel --backend rtl --n 300 ${flag} --trace \"$d/upd.fst\" && \
     test \"$(od -An -tu1 -N1 \"$d/upd.fst\" | tr -d ' ')\" = 0 && \
     test \"$(wc -c < \"$d/upd.fst\")\" -gt 1000 && echo trace-written")
  set_tests_properties(rtl_kernel_trace_${policy} PROPERTIES LABELS "quick;rtl" TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "trace-written")
endforeach()
