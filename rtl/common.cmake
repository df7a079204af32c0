# RTL building blocks shared by every folder of rtl/ (rtl/common/): the FIFO, the delay line and
# the valid pipe. Included by rtl.cmake, axi.cmake and updater.cmake (include_guard: once).
#
# Variables: CSD_COMMON_DIR, CSD_COMMON_SOURCES (every module of rtl/common/; no package needed).
# Tests:     rtl_lint_<module>[_<params>]   quick   verilator --lint-only -Wall, each module as the
#            top, with the parameter values that select each of its generate branches.
include_guard(GLOBAL)

set(CSD_COMMON_DIR "${CMAKE_CURRENT_LIST_DIR}/common")
set(CSD_COMMON_MODULES csd_valid_pipe csd_delay csd_fifo)
set(CSD_COMMON_SOURCES)
foreach(m ${CSD_COMMON_MODULES})
  list(APPEND CSD_COMMON_SOURCES "${CSD_COMMON_DIR}/${m}.sv")
endforeach()

find_package(verilator 5.0 QUIET HINTS $ENV{VERILATOR_ROOT})
if(NOT verilator_FOUND)
  return()
endif()
find_program(CSD_COMMON_VERILATOR_EXE NAMES verilator HINTS $ENV{VERILATOR_ROOT}/bin)
if(NOT CSD_COMMON_VERILATOR_EXE)
  set(CSD_COMMON_VERILATOR_EXE "${VERILATOR_BIN}")
endif()

enable_testing()
# name:module:parameters (comma-separated -G values; empty: the defaults)
set(CSD_COMMON_LINTS
    "csd_valid_pipe:csd_valid_pipe:"
    "csd_valid_pipe_d3:csd_valid_pipe:-GDepth=3"
    "csd_delay:csd_delay:"
    "csd_delay_d0:csd_delay:-GDepth=0"
    "csd_delay_d3:csd_delay:-GDepth=3"
    "csd_delay_d8:csd_delay:-GDepth=8"
    "csd_fifo:csd_fifo:"
    "csd_fifo_d1:csd_fifo:-GDepth=1"
    "csd_fifo_outreg:csd_fifo:-GOutReg=1'b1"
    "csd_fifo_outreg_d1:csd_fifo:-GOutReg=1'b1,-GDepth=1"
    "csd_fifo_outreg_d5:csd_fifo:-GOutReg=1'b1,-GDepth=5")
foreach(lint ${CSD_COMMON_LINTS})
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
           COMMAND "${CSD_COMMON_VERILATOR_EXE}" --lint-only -Wall
                   "${CMAKE_CURRENT_LIST_DIR}/lint/csd.vlt" ${CSD_COMMON_SOURCES}
                   --top-module ${module} ${params})
  set_tests_properties(rtl_lint_${name} PROPERTIES LABELS "quick;rtl;lint" TIMEOUT 120)
endforeach()
