# RTL: the SystemVerilog under rtl/, linted and simulated with Verilator (>= 5.0).
# Included from the top-level CMakeLists.txt (OPTIONAL). Without Verilator the project still
# configures and builds; the RTL tests are simply not registered.
#
# Targets:  csd_rtl_fp_models (every Verilated fp model, one static library so the Verilator
#           runtime is compiled once), tb_<unit> (one bench per unit, rtl/fp/tb/; tb_csd_fp_cast
#           drives the four csd_fp_cast models, one per format pair).
# Tests:    rtl_lint_<module>[_ftz|_<cast>]  quick       verilator --lint-only -Wall
#           rtl_tb_<unit>                    quick       biased random + directed, both policies
#           rtl_tb_csd_fp_cast_<cast>        quick       one format pair (+ f32_to_bf16_sr:
#                                                        stochastic rounding, modes mixed)
#           rtl_tb_<unit>_exhaustive_<k>     exhaustive  2^32 inputs in 16 shards (unary units,
#                                                        <unit> = csd_fp_cast_<cast> for casts)
# Options:  CSDKIT_RTL_TRACE=ON builds the models with FST tracing; a bench then writes
#           $CSDKIT_RTL_FST.<model>.fst when that variable is set.
# Variables for other RTL: CSD_FP_SOURCES (csd_fp_pkg, the valid pipe and the delay line of
#           rtl/common/ and every fp module, in compile order), CSD_RTL_VLT (the waiver file).
#           Unit latencies: csd_fp_pkg::*_LATENCY, digit_latency(). rtl/common/ is registered by
#           common.cmake.

include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")

find_package(verilator 5.0 QUIET HINTS $ENV{VERILATOR_ROOT})
if(NOT verilator_FOUND)
  if(CSDKIT_REQUIRE_ALL)
    message(FATAL_ERROR "csdkit RTL: Verilator >= 5.0 not found (Debian: apt-get install "
                        "verilator; or set VERILATOR_ROOT). CSDKIT_WITH_RTL is ON and "
                        "CSDKIT_REQUIRE_ALL is set: install it or configure with "
                        "-DCSDKIT_WITH_RTL=OFF")
  endif()
  message(STATUS "csdkit RTL: Verilator >= 5.0 not found (Debian: apt-get install verilator; "
                 "or set VERILATOR_ROOT). The RTL lint and simulation tests are skipped.")
  return()
endif()
find_program(CSDKIT_VERILATOR_EXE NAMES verilator HINTS $ENV{VERILATOR_ROOT}/bin)
if(NOT CSDKIT_VERILATOR_EXE)
  set(CSDKIT_VERILATOR_EXE "${VERILATOR_BIN}")
endif()
message(STATUS "csdkit RTL: Verilator ${verilator_VERSION} (${CSDKIT_VERILATOR_EXE})")

option(CSDKIT_RTL_TRACE "Build the Verilated RTL models with FST tracing" OFF)

set(CSD_RTL_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(CSD_RTL_VLT "${CSD_RTL_DIR}/lint/csd.vlt")
set(CSD_FP_SOURCES
    "${CSD_RTL_DIR}/pkg/csd_fp_pkg.sv"
    "${CSD_RTL_DIR}/common/csd_valid_pipe.sv"
    "${CSD_RTL_DIR}/common/csd_delay.sv"
    "${CSD_RTL_DIR}/fp/csd_fp_classify.sv"
    "${CSD_RTL_DIR}/fp/csd_fp_round.sv")
# Units with an FtzDaz parameter (two models each) and the conversion unit (policy-free).
set(CSD_FP_POLICY_UNITS csd_fp_add csd_fp_mul csd_fp_div csd_fp_sqrt csd_fp_sign)
set(CSD_FP_UNITS ${CSD_FP_POLICY_UNITS} csd_fp_cast)
# Units with a BitsPerStage parameter (digit recurrences).
set(CSD_FP_DIGIT_UNITS csd_fp_div csd_fp_sqrt)
foreach(unit ${CSD_FP_UNITS})
  list(APPEND CSD_FP_SOURCES "${CSD_RTL_DIR}/fp/${unit}.sv")
endforeach()
# csd_fp_cast, one model per format pair, name:SrcFmt:DstFmt:QuietNan (fmt_e values: 0 fp32,
# 1 fp16, 2 bf16). Verilated under the bench top csd_fp_cast_tb, which takes the formats as
# numbers (Verilator 5.006 refuses a -G value for an enum-typed parameter).
set(CSD_FP_CAST_CONFIGS "f16_to_f32:1:0:1" "bf16_to_f32:2:0:0" "f32_to_f16:0:1:1"
    "f32_to_bf16:0:2:1")
set(CSD_FP_CAST_TB_TOP "${CSD_RTL_DIR}/fp/tb/csd_fp_cast_tb.sv")
# Quick tests of tb_csd_fp_cast: each pair, and fp32 -> bf16 again with stochastic rounding.
set(CSD_FP_CAST_TESTS f16_to_f32 bf16_to_f32 f32_to_f16 f32_to_bf16 f32_to_bf16_sr)
# Unary units swept exhaustively (2^32 inputs, 16 shards of 2^28) under the exhaustive label,
# as test-name stem:bench[:--cfg of tb_csd_fp_cast].
set(CSD_FP_EXHAUSTIVE_UNITS "csd_fp_cast_f32_to_f16:tb_csd_fp_cast:f32_to_f16"
    "csd_fp_sqrt:tb_csd_fp_sqrt" "csd_fp_cast_f32_to_bf16:tb_csd_fp_cast:f32_to_bf16")
set(CSD_FP_EXHAUSTIVE_SHARDS 16)

# Verilator flags: lint-clean -Wall (warnings are fatal, so the parameter variants are linted
# by the build too), single-threaded model, datapath registers start random (--x-initial
# unique + randReset(2) in the benches) so only the reset valid pipeline can make them quiet.
# tb_public.vlt exposes each unit's Latency to the benches (kept out of the sources, so the
# units stay inlinable in larger designs).
set(CSD_VERILATOR_ARGS -Wall -O3 --x-assign fast --x-initial unique "${CSD_RTL_VLT}"
    "${CSD_RTL_DIR}/fp/tb/tb_public.vlt")
set(CSD_VERILATE_TRACE)
if(CSDKIT_RTL_TRACE)
  set(CSD_VERILATE_TRACE TRACE_FST)
endif()

add_library(csd_rtl_fp_models STATIC)
target_compile_options(csd_rtl_fp_models PRIVATE -O2)
set_target_properties(csd_rtl_fp_models PROPERTIES POSITION_INDEPENDENT_CODE ON)

# csd_fp_verilate(<top> <prefix> [-G...]): one model; CSD_FP_EXTRA_SOURCES (a bench top) is
# added to the sources when set.
function(csd_fp_verilate unit prefix)
  verilate(csd_rtl_fp_models ${CSD_VERILATE_TRACE}
           PREFIX ${prefix}
           TOP_MODULE ${unit}
           THREADS 1
           SOURCES ${CSD_FP_SOURCES} ${CSD_FP_EXTRA_SOURCES}
           VERILATOR_ARGS ${CSD_VERILATOR_ARGS} ${ARGN}
           OPT_FAST -O2
           OPT_SLOW -O2
           OPT_GLOBAL -O2)
endfunction()

foreach(unit ${CSD_FP_POLICY_UNITS})
  csd_fp_verilate(${unit} V${unit}_ieee "-GFtzDaz=1'b0")
  csd_fp_verilate(${unit} V${unit}_ftz "-GFtzDaz=1'b1")
endforeach()
set(CSD_FP_EXTRA_SOURCES "${CSD_FP_CAST_TB_TOP}")
foreach(cfg ${CSD_FP_CAST_CONFIGS})
  string(REPLACE ":" ";" fields "${cfg}")
  list(GET fields 0 name)
  list(GET fields 1 src)
  list(GET fields 2 dst)
  list(GET fields 3 quiet)
  csd_fp_verilate(csd_fp_cast_tb Vcsd_fp_cast_${name} -GSrcFmt=${src} -GDstFmt=${dst}
                  "-GQuietNan=1'b${quiet}")
endforeach()
unset(CSD_FP_EXTRA_SOURCES)
# The digit-recurrence units once more with 3 bits per stage (a count that does not divide the
# 24 digits), so a non-default pipeline depth is simulated too.
foreach(unit ${CSD_FP_DIGIT_UNITS})
  csd_fp_verilate(${unit} V${unit}_ieee_r3 "-GFtzDaz=1'b0" "-GBitsPerStage=3")
endforeach()

# ---- Benches ------------------------------------------------------------------------------------
foreach(unit ${CSD_FP_UNITS})
  add_executable(tb_${unit} "${CSD_RTL_DIR}/fp/tb/tb_${unit}.cpp")
  target_link_libraries(tb_${unit} PRIVATE csd_rtl_fp_models csdkit_hls)
  target_include_directories(tb_${unit} PRIVATE "${CSD_RTL_DIR}/fp/tb")
  # Verilator's runtime headers are not -Wextra clean; take them as system headers.
  target_include_directories(tb_${unit} SYSTEM PRIVATE "${VERILATOR_ROOT}/include")
  # The oracle is the host's SSE/F16C arithmetic: no contraction, no fast-math, F16C on.
  target_compile_options(tb_${unit} PRIVATE -O2 -mf16c -ffp-contract=off -fno-math-errno
                                            -Wall -Wextra)
  target_compile_definitions(tb_${unit} PRIVATE
    VM_TRACE=$<BOOL:${CSDKIT_RTL_TRACE}> VM_TRACE_FST=$<BOOL:${CSDKIT_RTL_TRACE}>)
  if(unit STREQUAL "csd_fp_cast")
    # The stochastic-rounding reference, RoundBf16Stochastic (state_q8.h), comes with csdkit_hls.
    foreach(test ${CSD_FP_CAST_TESTS})
      add_test(NAME rtl_tb_csd_fp_cast_${test} COMMAND tb_csd_fp_cast --cfg ${test})
      set_tests_properties(rtl_tb_csd_fp_cast_${test} PROPERTIES LABELS "quick;rtl" TIMEOUT 600)
    endforeach()
  else()
    add_test(NAME rtl_tb_${unit} COMMAND tb_${unit})
    set_tests_properties(rtl_tb_${unit} PROPERTIES LABELS "quick;rtl" TIMEOUT 600)
  endif()
endforeach()

foreach(entry ${CSD_FP_EXHAUSTIVE_UNITS})
  string(REPLACE ":" ";" fields "${entry}")
  list(GET fields 0 stem)
  list(GET fields 1 bench)
  set(cfg_args)
  list(LENGTH fields nfields)
  if(nfields GREATER 2)
    list(GET fields 2 cfg)
    set(cfg_args --cfg ${cfg})
  endif()
  math(EXPR last "${CSD_FP_EXHAUSTIVE_SHARDS} - 1")
  foreach(shard RANGE 0 ${last})
    if(shard LESS 10)
      set(tag "0${shard}")
    else()
      set(tag "${shard}")
    endif()
    add_test(NAME rtl_tb_${stem}_exhaustive_${tag}
             COMMAND ${bench} ${cfg_args} --exhaustive --shard ${shard}
                     --shards ${CSD_FP_EXHAUSTIVE_SHARDS})
    set_tests_properties(rtl_tb_${stem}_exhaustive_${tag} PROPERTIES
                         LABELS "exhaustive;rtl" TIMEOUT 7200)
  endforeach()
endforeach()

# ---- Lint ---------------------------------------------------------------------------------------
# Each module as the top, all sources given (modules outside its hierarchy are not elaborated).
# Units with a policy are linted with both values of FtzDaz; csd_fp_cast with its defaults
# (fp32 -> bf16, both rounding paths) and, through its bench top, with each format pair. The
# valid pipe and the delay line are linted with rtl/common/ (common.cmake).
foreach(module csd_fp_classify csd_fp_round ${CSD_FP_UNITS})
  set(lint_cmd "${CSDKIT_VERILATOR_EXE}" --lint-only -Wall "${CSD_RTL_VLT}" ${CSD_FP_SOURCES}
               --top-module ${module})
  add_test(NAME rtl_lint_${module} COMMAND ${lint_cmd})
  set_tests_properties(rtl_lint_${module} PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 120)
  if(module IN_LIST CSD_FP_POLICY_UNITS OR module STREQUAL "csd_fp_classify" OR
     module STREQUAL "csd_fp_round")
    add_test(NAME rtl_lint_${module}_ftz COMMAND ${lint_cmd} "-GFtzDaz=1'b1")
    set_tests_properties(rtl_lint_${module}_ftz PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 120)
  endif()
endforeach()
foreach(cfg ${CSD_FP_CAST_CONFIGS})
  string(REPLACE ":" ";" fields "${cfg}")
  list(GET fields 0 name)
  list(GET fields 1 src)
  list(GET fields 2 dst)
  list(GET fields 3 quiet)
  add_test(NAME rtl_lint_csd_fp_cast_${name}
           COMMAND "${CSDKIT_VERILATOR_EXE}" --lint-only -Wall "${CSD_RTL_VLT}" ${CSD_FP_SOURCES}
                   "${CSD_FP_CAST_TB_TOP}" --top-module csd_fp_cast_tb -GSrcFmt=${src}
                   -GDstFmt=${dst} "-GQuietNan=1'b${quiet}")
  set_tests_properties(rtl_lint_csd_fp_cast_${name} PROPERTIES LABELS "quick;rtl;lint"
                       TIMEOUT 120)
endforeach()
