# RTL building blocks of the compressed optimizer-state formats q8 / q8-bf16 (rtl/q8/,
# docs/state-formats.md): Philox4x32-10 and the per-element random numbers, dequantization,
# the magnitude index, the block absmax and its scale. Included from the top-level
# CMakeLists.txt after rtl.cmake (it uses rtl.cmake's CSD_FP_SOURCES):
#
#   include(${PROJECT_SOURCE_DIR}/rtl/q8.cmake OPTIONAL)
#
# Targets:  csd_gen_q8_tables_pkg   generator of csd_q8_tables_pkg.sv from the tables of
#                                   hls/include/csdkit/hls/state_q8.h (plain C++, always built)
#           csd_rtl_q8_tables_pkg   runs it: ${CSD_Q8_GEN_DIR}/csd_q8_tables_pkg.sv
#           csd_rtl_q8_models       the Verilated models of the benches (one library, one runtime)
#           tb_<unit>               one bench per unit (rtl/q8/tb/)
# Tests:    rtl_q8_tables_pkg                 quick   the generated package matches state_q8.h
#           rtl_lint_<module>[_<params>]      quick   verilator --lint-only -Wall
#           rtl_tb_<unit>                     quick   directed + random against state_q8.h
#                                                     (and Random123 for Philox), < 5 s each
# Variables for other RTL: CSD_Q8_SOURCES (the fp sources, rtl/common/'s delay line, the
#           generated tables package and the q8 modules, in compile order), CSD_Q8_TABLES_PKG.
include_guard(GLOBAL)

set(CSD_Q8_RTL_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(CSD_Q8_DIR "${CSD_Q8_RTL_DIR}/q8")
set(CSD_Q8_VLT "${CSD_Q8_RTL_DIR}/lint/csd.vlt")
set(CSD_Q8_GEN_DIR "${CMAKE_BINARY_DIR}/rtl/gen")
set(CSD_Q8_TABLES_PKG "${CSD_Q8_GEN_DIR}/csd_q8_tables_pkg.sv")

# ---- The generated tables package ---------------------------------------------------------------
# The maps and thresholds are written once, in state_q8.h; the generator turns them into a
# SystemVerilog package at build time. verilate() runs Verilator at configure time, so the
# package is also produced then (the same generator, compiled with try_compile) when missing.
set(CSD_GEN_Q8_SRC "${CSD_Q8_DIR}/gen_q8_tables_pkg.cpp")
set(CSD_GEN_Q8_INCLUDES "${PROJECT_SOURCE_DIR}/hls/include")
set(CSD_GEN_Q8_DEPS "${PROJECT_SOURCE_DIR}/hls/include/csdkit/hls/state_q8.h")

add_executable(csd_gen_q8_tables_pkg "${CSD_GEN_Q8_SRC}")
target_include_directories(csd_gen_q8_tables_pkg PRIVATE ${CSD_GEN_Q8_INCLUDES})
target_compile_features(csd_gen_q8_tables_pkg PRIVATE cxx_std_17)
target_compile_options(csd_gen_q8_tables_pkg PRIVATE -O1 -Wall -Wextra)

file(MAKE_DIRECTORY "${CSD_Q8_GEN_DIR}")
if(NOT EXISTS "${CSD_Q8_TABLES_PKG}")
  set(csd_gen_q8_boot "${CMAKE_BINARY_DIR}/rtl/gen/bootstrap_q8/gen_q8_tables_pkg")
  try_compile(gen_q8_compile_ok "${CMAKE_BINARY_DIR}/rtl/gen/bootstrap_q8"
              SOURCES "${CSD_GEN_Q8_SRC}"
              CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${CSD_GEN_Q8_INCLUDES}"
              COMPILE_DEFINITIONS -std=c++17
              OUTPUT_VARIABLE gen_q8_compile_out
              COPY_FILE "${csd_gen_q8_boot}")
  if(NOT gen_q8_compile_ok)
    message(FATAL_ERROR "csdkit RTL: compiling ${CSD_GEN_Q8_SRC} failed:\n${gen_q8_compile_out}")
  endif()
  execute_process(COMMAND "${csd_gen_q8_boot}" --out "${CSD_Q8_TABLES_PKG}"
                  RESULT_VARIABLE gen_q8_rc OUTPUT_VARIABLE gen_q8_out ERROR_VARIABLE gen_q8_out)
  if(NOT gen_q8_rc EQUAL 0 OR NOT EXISTS "${CSD_Q8_TABLES_PKG}")
    message(FATAL_ERROR "csdkit RTL: generating ${CSD_Q8_TABLES_PKG} failed:\n${gen_q8_out}")
  endif()
endif()
add_custom_command(OUTPUT "${CSD_Q8_TABLES_PKG}"
                   COMMAND csd_gen_q8_tables_pkg --out "${CSD_Q8_TABLES_PKG}"
                   DEPENDS csd_gen_q8_tables_pkg ${CSD_GEN_Q8_DEPS}
                   COMMENT "Generating csd_q8_tables_pkg.sv"
                   VERBATIM)
add_custom_target(csd_rtl_q8_tables_pkg DEPENDS "${CSD_Q8_TABLES_PKG}")

enable_testing()
add_test(NAME rtl_q8_tables_pkg
         COMMAND csd_gen_q8_tables_pkg --check "${CSD_Q8_TABLES_PKG}")
set_tests_properties(rtl_q8_tables_pkg PROPERTIES LABELS "quick;rtl" TIMEOUT 60)

# ---- Verilator ----------------------------------------------------------------------------------
find_package(verilator 5.0 QUIET HINTS $ENV{VERILATOR_ROOT})
if(NOT verilator_FOUND)
  message(STATUS "csdkit RTL/q8: Verilator >= 5.0 not found; the q8 lint and benches are "
                 "skipped.")
  return()
endif()
if(NOT DEFINED CSD_FP_SOURCES)
  message(FATAL_ERROR "csdkit RTL/q8: CSD_FP_SOURCES is not set: include rtl/rtl.cmake before "
                      "rtl/q8.cmake")
endif()
find_program(CSD_Q8_VERILATOR_EXE NAMES verilator HINTS $ENV{VERILATOR_ROOT}/bin)
if(NOT CSD_Q8_VERILATOR_EXE)
  set(CSD_Q8_VERILATOR_EXE "${VERILATOR_BIN}")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")

# The q8 modules, leaves first.
set(CSD_Q8_MODULES csd_philox4x32 csd_q8_rand16 csd_q8_dequant csd_q8_index csd_q8_absmax
    csd_q8_scale)
set(CSD_Q8_SOURCES ${CSD_FP_SOURCES} "${CSD_COMMON_DIR}/csd_delay.sv" "${CSD_Q8_TABLES_PKG}")
foreach(m ${CSD_Q8_MODULES})
  list(APPEND CSD_Q8_SOURCES "${CSD_Q8_DIR}/${m}.sv")
endforeach()
list(REMOVE_DUPLICATES CSD_Q8_SOURCES)

# As rtl.cmake's fp models: -Wall (fatal, so the build lints each configuration), datapath
# registers start random (--x-initial unique + randReset(2) in the benches), tb_public.vlt
# exposes the units' Latency to the benches.
set(CSD_Q8_VERILATOR_ARGS -Wall -O3 --x-assign fast --x-initial unique "${CSD_Q8_VLT}"
    "${CSD_Q8_DIR}/tb/tb_public.vlt")
set(CSD_Q8_TRACE)
if(CSDKIT_RTL_TRACE)
  set(CSD_Q8_TRACE TRACE_FST)
endif()

add_library(csd_rtl_q8_models STATIC)
target_compile_options(csd_rtl_q8_models PRIVATE -O2)
set_target_properties(csd_rtl_q8_models PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_dependencies(csd_rtl_q8_models csd_rtl_q8_tables_pkg)

function(csd_q8_verilate unit prefix)
  verilate(csd_rtl_q8_models ${CSD_Q8_TRACE}
           PREFIX ${prefix}
           TOP_MODULE ${unit}
           THREADS 1
           SOURCES ${CSD_Q8_SOURCES}
           VERILATOR_ARGS ${CSD_Q8_VERILATOR_ARGS} ${ARGN}
           OPT_FAST -O2
           OPT_SLOW -O1
           OPT_GLOBAL -O2)
endfunction()

# Philox with the default pipeline and with one more product register per round.
csd_q8_verilate(csd_philox4x32 Vcsd_philox4x32)
csd_q8_verilate(csd_philox4x32 Vcsd_philox4x32_m2 -GMulStages=2)
csd_q8_verilate(csd_q8_rand16 Vcsd_q8_rand16)
csd_q8_verilate(csd_q8_dequant Vcsd_q8_dequant_ieee "-GFtzDaz=1'b0")
csd_q8_verilate(csd_q8_dequant Vcsd_q8_dequant_ftz "-GFtzDaz=1'b1")
csd_q8_verilate(csd_q8_index Vcsd_q8_index)
# The absmax with 16 lanes (4 tree levels) and with 8 (an odd number of levels).
csd_q8_verilate(csd_q8_absmax Vcsd_q8_absmax)
csd_q8_verilate(csd_q8_absmax Vcsd_q8_absmax_l8 -GLanes=8)
csd_q8_verilate(csd_q8_scale Vcsd_q8_scale)

# ---- Benches ------------------------------------------------------------------------------------
# Random123 (Debian: librandom123-dev) is the Philox reference when its header is installed; the
# benches find it with __has_include and otherwise check against state_q8.h and the known
# answers only (and say so).
foreach(unit ${CSD_Q8_MODULES})
  add_executable(tb_${unit} "${CSD_Q8_DIR}/tb/tb_${unit}.cpp")
  target_link_libraries(tb_${unit} PRIVATE csd_rtl_q8_models csdkit_hls)
  target_include_directories(tb_${unit} PRIVATE "${CSD_Q8_DIR}/tb" "${CSD_Q8_RTL_DIR}/fp/tb")
  # Verilator's runtime headers are not -Wextra clean; take them as system headers.
  target_include_directories(tb_${unit} SYSTEM PRIVATE "${VERILATOR_ROOT}/include")
  # As the fp benches: the oracle is the host's SSE arithmetic; no contraction, no fast-math.
  target_compile_features(tb_${unit} PRIVATE cxx_std_17)
  target_compile_options(tb_${unit} PRIVATE -O2 -mf16c -ffp-contract=off -fno-math-errno
                                            -Wall -Wextra)
  target_compile_definitions(tb_${unit} PRIVATE
    VM_TRACE=$<BOOL:${CSDKIT_RTL_TRACE}> VM_TRACE_FST=$<BOOL:${CSDKIT_RTL_TRACE}>)
  add_test(NAME rtl_tb_${unit} COMMAND tb_${unit})
  set_tests_properties(rtl_tb_${unit} PROPERTIES LABELS "quick;rtl" TIMEOUT 300)
endforeach()

# ---- Lint ---------------------------------------------------------------------------------------
# Each module as the top, all sources given; the parameter values that select other generate
# branches too.
# name:module:parameters (comma-separated -G values; empty: the defaults)
set(CSD_Q8_LINTS
    "csd_philox4x32:csd_philox4x32:"
    "csd_philox4x32_m2:csd_philox4x32:-GMulStages=2"
    "csd_philox4x32_m3:csd_philox4x32:-GMulStages=3"
    "csd_q8_rand16:csd_q8_rand16:"
    "csd_q8_dequant:csd_q8_dequant:"
    "csd_q8_dequant_ftz:csd_q8_dequant:-GFtzDaz=1'b1"
    "csd_q8_index:csd_q8_index:"
    "csd_q8_absmax:csd_q8_absmax:"
    "csd_q8_absmax_l1:csd_q8_absmax:-GLanes=1"
    "csd_q8_absmax_l8:csd_q8_absmax:-GLanes=8"
    "csd_q8_scale:csd_q8_scale:"
    "csd_q8_scale_r3:csd_q8_scale:-GBitsPerStage=3")
foreach(lint ${CSD_Q8_LINTS})
  string(REPLACE ":" ";" fields "${lint}")
  list(GET fields 0 name)
  list(GET fields 1 module)
  list(LENGTH fields n)
  set(params)
  if(n GREATER 2)
    list(GET fields 2 params)
    string(REPLACE "," ";" params "${params}")
  endif()
  add_test(NAME rtl_lint_${name}
           COMMAND "${CSD_Q8_VERILATOR_EXE}" --lint-only -Wall "${CSD_Q8_VLT}" ${CSD_Q8_SOURCES}
                   --top-module ${module} ${params})
  set_tests_properties(rtl_lint_${name} PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 120)
endforeach()
