# RTL: the streaming updater core (rtl/kernels/updater/), linted and simulated with Verilator
# (>= 5.0) against the C++ model. Included from the top-level CMakeLists.txt, after rtl.cmake:
#
#   include(${PROJECT_SOURCE_DIR}/rtl/updater.cmake OPTIONAL)
#
# Without Verilator the project still configures and builds; these tests are not registered.
#
# Targets:  csd_rtl_updater_<cfg>        Verilated csd_update_core, one static library per cfg
#           tb_csd_update_core_<cfg>     the bench (rtl/kernels/updater/tb/), linked with the model
#           tb_csd_update_bundle_mux     unit bench of the kernel's bundle mux (one small model)
#           <cfg> = l4_ftz (Lanes 4, FTZ/DAZ), l16_ieee (Lanes 16, IEEE): between them both lane
#           counts the kernel builds use in tests and both policies (a Lanes-4 IEEE model, once
#           built too, was left out for CI time; the lint covers Lanes 2/4/8 in both policies)
# Tests:    rtl_lint_csd_update_<module>[_<params>]   quick    verilator --lint-only -Wall
#           rtl_core_<cfg>_matrix_<variant>           quick    every dtype x copy x dense/sparse
#           rtl_core_<cfg>_malformed                  quick    malformed streams, bad modes
#                                                              (l16_ieee: nightly)
#           rtl_core_<cfg>_q8                         quick    q8 / q8-bf16: every variant x dtype
#                                                              x copy x dense/sparse, refusals
#                                                              (l16: three variants; the others
#                                                              rtl_core_l16_ieee_q8_other, nightly)
#           rtl_core_<cfg>_q8_sizes                   nightly  the same at three sizes each
#           rtl_core_<cfg>_perf                       quick    cycles/word, latency (JSON lines)
#           rtl_core_<cfg>_random                     nightly  random launches
#           rtl_tb_csd_update_bundle_mux              quick    the bundle mux under random timing
# Options:  CSDKIT_RTL_TRACE=ON (rtl.cmake) builds the models with FST tracing; then
#           `tb_csd_update_core_<cfg> ... --fst FILE` writes a waveform.

find_package(verilator 5.0 QUIET HINTS $ENV{VERILATOR_ROOT})
if(NOT verilator_FOUND)
  message(STATUS "csdkit RTL updater: Verilator >= 5.0 not found; its lint and simulation "
                 "tests are skipped.")
  return()
endif()
find_program(CSD_UPD_VERILATOR_EXE NAMES verilator HINTS $ENV{VERILATOR_ROOT}/bin)
if(NOT CSD_UPD_VERILATOR_EXE)
  set(CSD_UPD_VERILATOR_EXE "${VERILATOR_BIN}")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")
# The q8 units and their generated tables package (the lanes dequantize, the quantizers after
# them requantize): CSD_Q8_TABLES_PKG and its target csd_rtl_q8_tables_pkg.
include("${CMAKE_CURRENT_LIST_DIR}/q8.cmake")

set(CSD_UPD_RTL_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(CSD_UPD_DIR "${CSD_UPD_RTL_DIR}/kernels/updater")
set(CSD_UPD_VLT "${CSD_UPD_RTL_DIR}/lint/csd.vlt")

# The fp units the lanes are built from (rtl/pkg, rtl/fp; owned by the fp units' author).
set(CSD_UPD_FP_SOURCES "${CSD_UPD_RTL_DIR}/pkg/csd_fp_pkg.sv")
foreach(f csd_fp_classify csd_fp_round csd_fp_add csd_fp_mul csd_fp_div csd_fp_sqrt csd_fp_sign
          csd_fp_cast)
  list(APPEND CSD_UPD_FP_SOURCES "${CSD_UPD_RTL_DIR}/fp/${f}.sv")
endforeach()

# The updater's own modules, leaves first (the FIFO and the delay line are rtl/common/'s).
set(CSD_UPD_MODULES csd_update_rd_port csd_update_wr_port csd_update_decode csd_update_lane
    csd_update_blk_unpack csd_update_blk_check csd_update_idx_check csd_update_merge
    csd_update_crc csd_update_crc_join csd_update_q8_quant csd_update_core)
set(CSD_UPD_SOURCES "${CSD_UPD_DIR}/csd_update_pkg.sv")
foreach(m ${CSD_UPD_MODULES})
  list(APPEND CSD_UPD_SOURCES "${CSD_UPD_DIR}/${m}.sv")
endforeach()
# rtl/q8's modules (csd_philox4x32 … csd_q8_scale) after the generated tables package.
set(CSD_UPD_Q8_SOURCES "${CSD_Q8_TABLES_PKG}")
foreach(m csd_philox4x32 csd_q8_rand16 csd_q8_dequant csd_q8_index csd_q8_absmax csd_q8_scale)
  list(APPEND CSD_UPD_Q8_SOURCES "${CSD_UPD_RTL_DIR}/q8/${m}.sv")
endforeach()
set(CSD_UPD_ALL_SOURCES ${CSD_UPD_FP_SOURCES} ${CSD_COMMON_SOURCES} ${CSD_UPD_Q8_SOURCES}
    ${CSD_UPD_SOURCES})

# -Wall is fatal, so the build lints each configuration too. --assert turns on the sources'
# simulation checks (FIFO over/underflow, channel misuse, the fp units' latencies against the
# lane schedule). Datapath registers start random (--x-initial unique + randReset(2) in the
# bench), so only the reset control state can make the core quiet.
set(CSD_UPD_VERILATOR_ARGS -Wall -O3 --x-assign fast --x-initial unique --assert ${CSD_UPD_VLT})
set(CSD_UPD_TRACE)
if(CSDKIT_RTL_TRACE)
  set(CSD_UPD_TRACE TRACE_FST)
endif()

# Optimizer variants of tests/test_util.h AllVariants(), one quick matrix test each.
set(CSD_UPD_VARIANTS adamw adamw_wd_t7 adam adam_l2 sgd_mom_first sgd_mom_damp_l2
    sgd_nesterov sgd_plain adagrad lion)

# name:lanes:ftz
set(CSD_UPD_CONFIGS "l4_ftz:4:1" "l16_ieee:16:0")

foreach(cfg ${CSD_UPD_CONFIGS})
  string(REPLACE ":" ";" fields "${cfg}")
  list(GET fields 0 name)
  list(GET fields 1 lanes)
  list(GET fields 2 ftz)

  add_library(csd_rtl_updater_${name} STATIC)
  set_target_properties(csd_rtl_updater_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # OPT_FAST -O1: about 340 CPU-s less to compile the three variants than -O2 on two AMD EPYC
  # cores, for about 5 % more simulation time in their quick tests (408 -> 429 s summed).
  verilate(csd_rtl_updater_${name} ${CSD_UPD_TRACE}
           PREFIX Vcsd_update_core_${name}
           TOP_MODULE csd_update_core
           THREADS 1
           SOURCES ${CSD_UPD_ALL_SOURCES}
           VERILATOR_ARGS ${CSD_UPD_VERILATOR_ARGS} -GLanes=${lanes} "-GFtzDaz=1'b${ftz}"
           OPT_FAST -O1
           OPT_SLOW -O1
           OPT_GLOBAL -O2)
  add_dependencies(csd_rtl_updater_${name} csd_rtl_q8_tables_pkg)

  # The bench checks against the tests' reference (csdkit_test_util): built with the tests.
  if(NOT TARGET csdkit_test_util)
    continue()
  endif()
  set(tb tb_csd_update_core_${name})
  add_executable(${tb} "${CSD_UPD_DIR}/tb/tb_csd_update_core.cpp")
  target_link_libraries(${tb} PRIVATE csd_rtl_updater_${name} csdkit_test_util csdkit_platform)
  target_include_directories(${tb} PRIVATE "${CSD_UPD_DIR}/tb")
  # Verilator's runtime headers are not -Wextra clean; take them as system headers.
  target_include_directories(${tb} SYSTEM PRIVATE "${VERILATOR_ROOT}/include")
  # Built like the model (the bench calls it): no contraction, no fast-math, F16C.
  target_compile_options(${tb} PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)
  target_compile_definitions(${tb} PRIVATE
    TB_MODEL=Vcsd_update_core_${name}
    TB_HEADER="Vcsd_update_core_${name}.h"
    TB_MODEL_NAME="csd_update_core_${name}"
    TB_LANES=${lanes}
    TB_FTZ=${ftz}
    VM_TRACE=$<BOOL:${CSDKIT_RTL_TRACE}> VM_TRACE_FST=$<BOOL:${CSDKIT_RTL_TRACE}>)

  # Every variant at Lanes 4 in the quick tests; at Lanes 16 one of each optimizer family
  # (AdamW, Adam with L2, SGD with momentum, dampening and L2, Adagrad, Lion: 13-15 s each), the
  # other five nightly.
  foreach(variant ${CSD_UPD_VARIANTS})
    set(matrix_label "quick;rtl")
    if(lanes EQUAL 16 AND
       variant MATCHES "^(adamw_wd_t7|adam|sgd_mom_first|sgd_nesterov|sgd_plain)$")
      set(matrix_label "nightly;rtl")
    endif()
    add_test(NAME rtl_core_${name}_matrix_${variant}
             COMMAND ${tb} --suite matrix --variant ${variant})
    set_tests_properties(rtl_core_${name}_matrix_${variant} PROPERTIES
                         LABELS "${matrix_label}" TIMEOUT 600 COST 12)
  endforeach()
  # The malformed streams at Lanes 4 in the quick tests; at Lanes 16 (80 s since the q8 logic
  # shares the model) nightly, for CI time.
  add_test(NAME rtl_core_${name}_malformed COMMAND ${tb} --suite malformed)
  if(lanes EQUAL 16)
    set(malformed_label "nightly;rtl")
  else()
    set(malformed_label "quick;rtl")
  endif()
  set_tests_properties(rtl_core_${name}_malformed PROPERTIES LABELS "${malformed_label}"
                       TIMEOUT 600 COST 80)
  # The q8 formats: every variant x dtype x copy x dense/sparse x format once (quick; at Lanes
  # 16 AdamW, Adagrad and Lion, both moments, v alone and m alone, ~14 s; the other seven
  # variants nightly), three sizes each (nightly).
  if(lanes EQUAL 16)
    add_test(NAME rtl_core_${name}_q8 COMMAND ${tb} --suite q8 --variant adamw,adagrad,lion)
    add_test(NAME rtl_core_${name}_q8_other COMMAND ${tb} --suite q8 --variant
             adamw_wd_t7,adam,adam_l2,sgd_mom_first,sgd_mom_damp_l2,sgd_nesterov,sgd_plain)
    set_tests_properties(rtl_core_${name}_q8_other PROPERTIES LABELS "nightly;rtl" TIMEOUT 1800)
  else()
    add_test(NAME rtl_core_${name}_q8 COMMAND ${tb} --suite q8)
  endif()
  set_tests_properties(rtl_core_${name}_q8 PROPERTIES LABELS "quick;rtl" TIMEOUT 600 COST 40)
  add_test(NAME rtl_core_${name}_q8_sizes COMMAND ${tb} --suite q8 --iters 3)
  set_tests_properties(rtl_core_${name}_q8_sizes PROPERTIES LABELS "nightly;rtl" TIMEOUT 7200)
  add_test(NAME rtl_core_${name}_perf COMMAND ${tb} --suite perf)
  set_tests_properties(rtl_core_${name}_perf PROPERTIES LABELS "quick;rtl" TIMEOUT 600)
  add_test(NAME rtl_core_${name}_random COMMAND ${tb} --suite random --iters 400)
  set_tests_properties(rtl_core_${name}_random PROPERTIES LABELS "nightly;rtl" TIMEOUT 7200)
endforeach()

# ---- Unit bench of csd_update_bundle_mux ---------------------------------------------------------
# The kernel's mux of two read and two write masters on one bundle, alone: its own executable
# with one small Verilated model (the mux behind the flat-port bench top tb/csd_update_bundle_mux_tb
# .sv, the W order queue 3 deep so that it fills), checked by C++ models of the masters and the
# subordinate under random timing (tb/tb_csd_update_bundle_mux.cpp). Quick.
set(CSD_UPD_MUX_TB_SOURCES "${CSD_UPD_RTL_DIR}/axi/csd_axi_pkg.sv" "${CSD_COMMON_DIR}/csd_fifo.sv"
    "${CSD_UPD_DIR}/csd_update_bundle_mux.sv" "${CSD_UPD_DIR}/tb/csd_update_bundle_mux_tb.sv")
add_executable(tb_csd_update_bundle_mux "${CSD_UPD_DIR}/tb/tb_csd_update_bundle_mux.cpp")
verilate(tb_csd_update_bundle_mux ${CSD_UPD_TRACE}
         PREFIX Vcsd_update_bundle_mux_tb
         TOP_MODULE csd_update_bundle_mux_tb
         THREADS 1
         SOURCES ${CSD_UPD_MUX_TB_SOURCES}
         VERILATOR_ARGS ${CSD_UPD_VERILATOR_ARGS} -GMaxBursts=3
         OPT_FAST -O1
         OPT_SLOW -O1
         OPT_GLOBAL -O1)
# tb_check.h of the fp benches: options, seed, the checker and its GOT=/EXP= reports.
target_include_directories(tb_csd_update_bundle_mux PRIVATE "${CSD_UPD_RTL_DIR}/fp/tb")
target_include_directories(tb_csd_update_bundle_mux SYSTEM PRIVATE "${VERILATOR_ROOT}/include")
target_compile_features(tb_csd_update_bundle_mux PRIVATE cxx_std_17)
# -Wall -Wextra on the bench only: the Verilator runtime compiled into it is not -Wextra clean.
target_compile_options(tb_csd_update_bundle_mux PRIVATE -O1)
set_property(SOURCE "${CSD_UPD_DIR}/tb/tb_csd_update_bundle_mux.cpp" APPEND PROPERTY
             COMPILE_OPTIONS -Wall -Wextra)
target_compile_definitions(tb_csd_update_bundle_mux PRIVATE
  VM_TRACE=$<BOOL:${CSDKIT_RTL_TRACE}> VM_TRACE_FST=$<BOOL:${CSDKIT_RTL_TRACE}>)
add_test(NAME rtl_tb_csd_update_bundle_mux COMMAND tb_csd_update_bundle_mux)
set_tests_properties(rtl_tb_csd_update_bundle_mux PROPERTIES LABELS "quick;rtl" TIMEOUT 120)

# ---- Lint ---------------------------------------------------------------------------------------
# Each module as the top (default parameters), all sources given; the core and the modules
# with a Lanes parameter also at Lanes 2 / 4 / 8, and the policy-dependent ones with FtzDaz = 1.
# The core at Lanes 16 (IEEE) is what the build Verilates with the same -Wall and waivers (a
# warning fails the build), so that lint (20 s) is nightly only.
set(csd_upd_lint_cmd "${CSD_UPD_VERILATOR_EXE}" --lint-only -Wall ${CSD_UPD_VLT}
    ${CSD_UPD_ALL_SOURCES})
foreach(module ${CSD_UPD_MODULES})
  set(lint_label "quick;rtl;lint")
  if(module STREQUAL "csd_update_core")
    set(lint_label "nightly;rtl;lint")
  endif()
  add_test(NAME rtl_lint_${module} COMMAND ${csd_upd_lint_cmd} --top-module ${module})
  set_tests_properties(rtl_lint_${module} PROPERTIES LABELS "${lint_label}" TIMEOUT 300)
endforeach()
foreach(module csd_update_core csd_update_lane csd_update_decode)
  add_test(NAME rtl_lint_${module}_ftz
           COMMAND ${csd_upd_lint_cmd} --top-module ${module} "-GFtzDaz=1'b1")
  set_tests_properties(rtl_lint_${module}_ftz PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 300)
endforeach()
foreach(lanes 2 4 8)
  foreach(module csd_update_core csd_update_merge csd_update_idx_check csd_update_blk_unpack)
    add_test(NAME rtl_lint_${module}_l${lanes}
             COMMAND ${csd_upd_lint_cmd} --top-module ${module} -GLanes=${lanes})
    set_tests_properties(rtl_lint_${module}_l${lanes} PROPERTIES
                         LABELS "quick;rtl;lint" TIMEOUT 300)
  endforeach()
endforeach()
