# AXI infrastructure of the RTL kernels (rtl/axi/), the generated argument-register packages and
# Vitis port wrappers (rtl/gen/), the emulation harness (emu/harness/) and their Verilator
# benches. Included from the top-level CMakeLists.txt:
#   include(${PROJECT_SOURCE_DIR}/rtl/axi.cmake OPTIONAL)
#
# Targets:  csdkit_harness          the harness library (plain C++, always built)
#           csd_gen_args_pkg        generator of <kernel>_args_pkg.sv from an argument table and
#                                   of <top>.sv, the Vitis port wrapper of a hand-written core
#           csd_rtl_axi_args_pkgs   runs it, writing ${CSD_AXI_GEN_DIR}/<kernel>_args_pkg.sv and
#                                   ${CSD_AXI_GEN_DIR}/<top>.sv
#           csd_rtl_axi_models      the Verilated benches' models (one library, one runtime)
#           tb_csd_axi_copy_top, tb_csd_axi_masters, tb_csd_update_ctrl
# Tests:    rtl_axi_lint_<module>        quick    verilator --lint-only -Wall
#           rtl_axi_args_pkg_<kernel>    quick    generated package matches its table
#           rtl_axi_wrapper_<top>        quick    generated wrapper matches its table and core
#           rtl_axi_tb_<bench>           quick    the benches (seeded; --full under nightly)
# Variables for other RTL: CSD_AXI_SOURCES (package, rtl/common/'s FIFO, modules, in compile
#           order), CSD_AXI_GEN_DIR, CSD_UPDATE_ARGS_PKG (the generated csd_update_args_pkg.sv),
#           CSD_UPDATE_WRAPPER (the generated top csd_update.sv), CSD_AXI_VLT (the waiver file).
include_guard(GLOBAL)

include("${CMAKE_CURRENT_LIST_DIR}/../emu/harness/harness.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")

set(CSD_AXI_RTL_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(CSD_AXI_VLT "${CSD_AXI_RTL_DIR}/lint/csd.vlt")
set(CSD_AXI_GEN_DIR "${CMAKE_BINARY_DIR}/rtl/gen")
set(CSD_AXI_SOURCES
    "${CSD_AXI_RTL_DIR}/axi/csd_axi_pkg.sv"
    "${CSD_COMMON_DIR}/csd_fifo.sv"
    "${CSD_AXI_RTL_DIR}/axi/csd_axi_rd_master.sv"
    "${CSD_AXI_RTL_DIR}/axi/csd_axi_wr_master.sv"
    "${CSD_AXI_RTL_DIR}/axi/csd_axil_ctrl.sv")

# ---- Generated argument packages and port wrappers ----------------------------------------------
# The offsets and bundles are written once, in the C++ argument tables; the generator turns a
# table into a SystemVerilog package, and a table plus a hand-written core's header into the
# core's Vitis port wrapper (the top), at build time. verilate() runs Verilator once at
# configure time, so the files are also produced then (the same generator, compiled with
# try_compile) when they do not exist yet.
set(CSD_GEN_ARGS_SRC "${CSD_AXI_RTL_DIR}/gen/gen_args_pkg.cpp")
set(CSD_GEN_ARGS_INCLUDES "${PROJECT_SOURCE_DIR}/hls/include" "${PROJECT_SOURCE_DIR}/hls/shim"
                          "${CSD_AXI_RTL_DIR}/axi/tb")
set(CSD_GEN_ARGS_TABLES "${PROJECT_SOURCE_DIR}/hls/include/csdkit/hls/update_args.h"
                        "${CSD_AXI_RTL_DIR}/axi/tb/csd_axi_copy_args.h")
set(CSD_AXI_KERNELS csd_update csd_axi_copy)
# top:core file (relative to rtl/): each top is generated from its core's header.
set(CSD_AXI_WRAPPERS
    "csd_update:kernels/updater/csd_update_kernel.sv"
    "csd_axi_copy_top:axi/tb/csd_axi_copy_kernel.sv"
    "csd_axi_master_tb_top:axi/tb/csd_axi_master_tb.sv"
    "csd_update_ctrl_tb_top:axi/tb/csd_update_ctrl_tb.sv")

add_executable(csd_gen_args_pkg "${CSD_GEN_ARGS_SRC}")
target_include_directories(csd_gen_args_pkg PRIVATE ${CSD_GEN_ARGS_INCLUDES})
target_compile_features(csd_gen_args_pkg PRIVATE cxx_std_17)
target_compile_options(csd_gen_args_pkg PRIVATE -O1 -Wall -Wextra)

# Every generated file (by name): the generator's arguments and the inputs it depends on.
file(MAKE_DIRECTORY "${CSD_AXI_GEN_DIR}")
set(csd_gen_files)
foreach(kernel ${CSD_AXI_KERNELS})
  list(APPEND csd_gen_files ${kernel}_args_pkg.sv)
  set(csd_gen_args_${kernel}_args_pkg.sv --kernel ${kernel})
  set(csd_gen_deps_${kernel}_args_pkg.sv ${CSD_GEN_ARGS_TABLES})
endforeach()
set(CSD_AXI_WRAPPER_TOPS)
foreach(w ${CSD_AXI_WRAPPERS})
  string(REPLACE ":" ";" fields "${w}")
  list(GET fields 0 top)
  list(GET fields 1 core)
  set(CSD_AXI_CORE_${top} "${CSD_AXI_RTL_DIR}/${core}")
  list(APPEND CSD_AXI_WRAPPER_TOPS ${top})
  list(APPEND csd_gen_files ${top}.sv)
  set(csd_gen_args_${top}.sv --wrapper ${top} --core "${CSD_AXI_CORE_${top}}")
  set(csd_gen_deps_${top}.sv ${CSD_GEN_ARGS_TABLES} "${CSD_AXI_CORE_${top}}")
endforeach()

# Configure time: compile the generator once if a file is missing, then run it for those.
set(csd_gen_boot)
foreach(name ${csd_gen_files})
  if(NOT EXISTS "${CSD_AXI_GEN_DIR}/${name}")
    set(csd_gen_boot "${CMAKE_BINARY_DIR}/rtl/gen/bootstrap/gen_args_pkg")
  endif()
endforeach()
if(csd_gen_boot)
  try_compile(gen_compile_ok "${CMAKE_BINARY_DIR}/rtl/gen/bootstrap"
              SOURCES "${CSD_GEN_ARGS_SRC}"
              CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${CSD_GEN_ARGS_INCLUDES}"
              COMPILE_DEFINITIONS -std=c++17
              OUTPUT_VARIABLE gen_compile_out
              COPY_FILE "${csd_gen_boot}")
  if(NOT gen_compile_ok)
    message(FATAL_ERROR "csdkit RTL: compiling ${CSD_GEN_ARGS_SRC} failed:\n${gen_compile_out}")
  endif()
endif()

set(CSD_AXI_GENERATED)
foreach(name ${csd_gen_files})
  set(out "${CSD_AXI_GEN_DIR}/${name}")
  if(NOT EXISTS "${out}")
    execute_process(COMMAND "${csd_gen_boot}" ${csd_gen_args_${name}} --out "${out}"
                    RESULT_VARIABLE gen_rc OUTPUT_VARIABLE gen_out ERROR_VARIABLE gen_out)
    if(NOT gen_rc EQUAL 0 OR NOT EXISTS "${out}")
      message(FATAL_ERROR "csdkit RTL: generating ${out} failed:\n${gen_out}")
    endif()
  endif()
  add_custom_command(OUTPUT "${out}"
                     COMMAND csd_gen_args_pkg ${csd_gen_args_${name}} --out "${out}"
                     DEPENDS csd_gen_args_pkg ${csd_gen_deps_${name}}
                     COMMENT "Generating ${name}"
                     VERBATIM)
  list(APPEND CSD_AXI_GENERATED "${out}")
endforeach()
add_custom_target(csd_rtl_axi_args_pkgs DEPENDS ${CSD_AXI_GENERATED})
set(CSD_UPDATE_ARGS_PKG "${CSD_AXI_GEN_DIR}/csd_update_args_pkg.sv")
set(CSD_COPY_ARGS_PKG "${CSD_AXI_GEN_DIR}/csd_axi_copy_args_pkg.sv")
set(CSD_UPDATE_WRAPPER "${CSD_AXI_GEN_DIR}/csd_update.sv")
set(CSD_UPDATE_CORE "${CSD_AXI_CORE_csd_update}")

enable_testing()
foreach(kernel ${CSD_AXI_KERNELS})
  add_test(NAME rtl_axi_args_pkg_${kernel}
           COMMAND csd_gen_args_pkg --kernel ${kernel}
                   --check "${CSD_AXI_GEN_DIR}/${kernel}_args_pkg.sv")
  set_tests_properties(rtl_axi_args_pkg_${kernel} PROPERTIES LABELS "quick;rtl" TIMEOUT 60)
endforeach()
foreach(top ${CSD_AXI_WRAPPER_TOPS})
  add_test(NAME rtl_axi_wrapper_${top}
           COMMAND csd_gen_args_pkg --wrapper ${top} --core "${CSD_AXI_CORE_${top}}"
                   --check "${CSD_AXI_GEN_DIR}/${top}.sv")
  set_tests_properties(rtl_axi_wrapper_${top} PROPERTIES LABELS "quick;rtl" TIMEOUT 60)
endforeach()

# ---- Verilator ----------------------------------------------------------------------------------
find_package(verilator 5.0 QUIET HINTS $ENV{VERILATOR_ROOT})
if(NOT verilator_FOUND)
  message(STATUS "csdkit RTL/AXI: Verilator >= 5.0 not found; the AXI lint and benches are "
                 "skipped (csdkit_harness is still built).")
  return()
endif()
find_program(CSD_AXI_VERILATOR_EXE NAMES verilator HINTS $ENV{VERILATOR_ROOT}/bin)
if(NOT CSD_AXI_VERILATOR_EXE)
  set(CSD_AXI_VERILATOR_EXE "${VERILATOR_BIN}")
endif()

set(CSD_AXI_TB_DIR "${CSD_AXI_RTL_DIR}/axi/tb")
# Each bench: the AXI sources, its generated top and the hand-written core the top wraps.
set(CSD_AXI_COPY_SOURCES "${CSD_AXI_RTL_DIR}/axi/csd_axi_pkg.sv" "${CSD_COPY_ARGS_PKG}"
    ${CSD_AXI_SOURCES} "${CSD_AXI_CORE_csd_axi_copy_top}" "${CSD_AXI_GEN_DIR}/csd_axi_copy_top.sv")
set(CSD_AXI_MASTER_SOURCES ${CSD_AXI_SOURCES} "${CSD_AXI_CORE_csd_axi_master_tb_top}"
    "${CSD_AXI_GEN_DIR}/csd_axi_master_tb_top.sv")
set(CSD_AXI_CTRL_SOURCES "${CSD_AXI_RTL_DIR}/axi/csd_axi_pkg.sv" "${CSD_UPDATE_ARGS_PKG}"
    ${CSD_AXI_SOURCES} "${CSD_AXI_CORE_csd_update_ctrl_tb_top}"
    "${CSD_AXI_GEN_DIR}/csd_update_ctrl_tb_top.sv")
list(REMOVE_DUPLICATES CSD_AXI_COPY_SOURCES)
list(REMOVE_DUPLICATES CSD_AXI_CTRL_SOURCES)

# The master bench's parameters: small and not powers of two, so the benches cover more than
# the copy kernel's defaults (8 outstanding, 64-beat bursts, 512/128-word FIFOs).
set(CSD_AXI_MASTER_TB_PARAMS -GMaxOutstanding=3 -GMaxBurstLen=16 -GRdFifoDepth=40
                             -GWrFifoDepth=24)

# Lint-clean -Wall (fatal), assertions on, registers start random (--x-initial unique and
# randReset(2) in VerilatedDut) so only reset can make control state quiet.
set(CSD_AXI_VERILATOR_ARGS -Wall --assert -O3 --x-assign fast --x-initial unique
                           "${CSD_AXI_VLT}")

add_library(csd_rtl_axi_models STATIC)
target_compile_options(csd_rtl_axi_models PRIVATE -O2)
set_target_properties(csd_rtl_axi_models PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_dependencies(csd_rtl_axi_models csd_rtl_axi_args_pkgs)

function(csd_axi_verilate top)
  cmake_parse_arguments(V "" "" "SOURCES;ARGS" ${ARGN})
  verilate(csd_rtl_axi_models TRACE_FST
           PREFIX V${top}
           TOP_MODULE ${top}
           THREADS 1
           SOURCES ${V_SOURCES}
           VERILATOR_ARGS ${CSD_AXI_VERILATOR_ARGS} ${V_ARGS}
           OPT_FAST -O2
           OPT_SLOW -O1
           OPT_GLOBAL -O2)
endfunction()

csd_axi_verilate(csd_axi_copy_top SOURCES ${CSD_AXI_COPY_SOURCES})
csd_axi_verilate(csd_axi_master_tb_top SOURCES ${CSD_AXI_MASTER_SOURCES}
                 ARGS ${CSD_AXI_MASTER_TB_PARAMS})
csd_axi_verilate(csd_update_ctrl_tb_top SOURCES ${CSD_AXI_CTRL_SOURCES})

# ---- Benches ------------------------------------------------------------------------------------
foreach(bench tb_csd_axi_copy_top tb_csd_axi_masters tb_csd_update_ctrl)
  add_executable(${bench} "${CSD_AXI_TB_DIR}/${bench}.cpp")
  target_link_libraries(${bench} PRIVATE csd_rtl_axi_models csdkit_harness csdkit_hls)
  target_include_directories(${bench} PRIVATE "${CSD_AXI_TB_DIR}")
  # Verilator's runtime headers are not -Wextra clean; take them as system headers.
  target_include_directories(${bench} SYSTEM PRIVATE "${VERILATOR_ROOT}/include"
                                                     "${VERILATOR_ROOT}/include/vltstd")
  target_compile_features(${bench} PRIVATE cxx_std_17)
  target_compile_options(${bench} PRIVATE -O2 -Wall -Wextra)
  target_compile_definitions(${bench} PRIVATE VM_TRACE=1 VM_TRACE_FST=1)
endforeach()

foreach(bench copy_top masters update_ctrl)
  set(exe tb_csd_axi_${bench})
  if(bench STREQUAL "update_ctrl")
    set(exe tb_csd_update_ctrl)
  endif()
  add_test(NAME rtl_axi_tb_${bench} COMMAND ${exe})
  set_tests_properties(rtl_axi_tb_${bench} PROPERTIES LABELS "quick;rtl" TIMEOUT 300)
  add_test(NAME rtl_axi_tb_${bench}_full COMMAND ${exe} --full)
  set_tests_properties(rtl_axi_tb_${bench}_full PROPERTIES LABELS "nightly;rtl" TIMEOUT 3600)
endforeach()

# ---- Lint ---------------------------------------------------------------------------------------
# Each module as the top with its sources (rtl/common/'s FIFO: common.cmake); each bench core
# and its generated top; the master bench top also with the bench's and the smallest
# parameters.
function(csd_axi_lint name module)
  add_test(NAME rtl_axi_lint_${name}
           COMMAND "${CSD_AXI_VERILATOR_EXE}" --lint-only -Wall "${CSD_AXI_VLT}" ${ARGN}
                   --top-module ${module})
  set_tests_properties(rtl_axi_lint_${name} PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 120)
endfunction()
foreach(module csd_axi_rd_master csd_axi_wr_master csd_axil_ctrl)
  csd_axi_lint(${module} ${module} ${CSD_AXI_SOURCES})
endforeach()
csd_axi_lint(csd_axi_copy_kernel csd_axi_copy_kernel ${CSD_AXI_COPY_SOURCES})
csd_axi_lint(csd_axi_copy_top csd_axi_copy_top ${CSD_AXI_COPY_SOURCES})
csd_axi_lint(csd_update_ctrl_tb csd_update_ctrl_tb ${CSD_AXI_CTRL_SOURCES})
csd_axi_lint(csd_update_ctrl_tb_top csd_update_ctrl_tb_top ${CSD_AXI_CTRL_SOURCES})
csd_axi_lint(csd_axi_master_tb csd_axi_master_tb ${CSD_AXI_MASTER_SOURCES})
csd_axi_lint(csd_axi_master_tb_top csd_axi_master_tb_top ${CSD_AXI_MASTER_SOURCES})
csd_axi_lint(csd_axi_master_tb_top_small csd_axi_master_tb_top ${CSD_AXI_MASTER_SOURCES}
             ${CSD_AXI_MASTER_TB_PARAMS})
csd_axi_lint(csd_axi_master_tb_top_min csd_axi_master_tb_top ${CSD_AXI_MASTER_SOURCES}
             -GMaxOutstanding=1 -GMaxBurstLen=1 -GRdFifoDepth=1 -GWrFifoDepth=1)
