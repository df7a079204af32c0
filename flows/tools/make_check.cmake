# ctest script (flows_makefile): flows/Makefile without Vitis or Vivado, through `make -n`.
#   cmake -DMAKE=<make> -DROOT=<source dir> -DWORK=<scratch dir> -P make_check.cmake
#
# 1. With no v++ / vivado on PATH, `make -n hw` and `make -n rtl_xo` stop before doing anything,
#    non-zero, saying which tool is missing and what to source; with v++ but no platform, `make hw`
#    stops at the platform check (nothing else runs: the stand-in platforminfo fails).
# 2. With stand-in tools, the dry run of hw and hw_emu shows the v++ compile and link commands
#    the flow is meant to run: the SmartSSD platform, the HLS top, hls/include (never hls/shim),
#    the numeric-contract Tcl, the generated connectivity config, emconfigutil for hw_emu.
set(platform xilinx_u2_gen3x4_xdma_gc_2_202110_1)
set(failures 0)

function(expect_contains what text needle)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(SEND_ERROR "${what}\n  EXP: output containing `${needle}`\n  GOT:\n${text}")
  else()
    message(STATUS "ok   ${what}: `${needle}`")
  endif()
endfunction()

function(run_make out_rc out_text)
  execute_process(COMMAND ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${o}${e}" PARENT_SCOPE)
endfunction()

# ---- 1. missing tools ------------------------------------------------------------------------
run_make(rc text ${CMAKE_COMMAND} -E env PATH=/nonexistent
         ${MAKE} -n -C ${ROOT}/flows hw BUILD_DIR=${WORK})
if(rc EQUAL 0)
  message(SEND_ERROR "make -n hw without v++ succeeded; expected a refusal\n${text}")
endif()
expect_contains("make hw without v++" "${text}"
  "v++ not found: source <Vitis>/settings64.sh (Vitis 2021.1+ with the ${platform} platform) and run again")

run_make(rc text ${CMAKE_COMMAND} -E env PATH=/nonexistent
         ${MAKE} -n -C ${ROOT}/flows rtl_xo BUILD_DIR=${WORK})
if(rc EQUAL 0)
  message(SEND_ERROR "make -n rtl_xo without vivado succeeded; expected a refusal\n${text}")
endif()
expect_contains("make rtl_xo without vivado" "${text}" "vivado not found: source <Vivado>/settings64.sh")

run_make(rc text ${MAKE} -C ${ROOT}/flows help BUILD_DIR=${WORK} VPP=csdkit-no-such-tool)
if(NOT rc EQUAL 0)
  message(SEND_ERROR "make help failed (${rc})\n${text}")
endif()
expect_contains("make help" "${text}" "v++:    not found (source <Vitis>/settings64.sh)")

# v++ present but the platform is not installed: stops at the platform check, saying so.
find_program(TRUE_EXE true REQUIRED)
find_program(FALSE_EXE false REQUIRED)
run_make(rc text ${MAKE} -C ${ROOT}/flows hw VPP=${TRUE_EXE} PLATFORMINFO=${FALSE_EXE}
         BUILD_DIR=${WORK}/no_platform)
if(rc EQUAL 0)
  message(SEND_ERROR "make hw without the platform succeeded; expected a refusal\n${text}")
endif()
expect_contains("make hw without the platform" "${text}"
  "platform ${platform} not found: install the SmartSSD platform package and set PLATFORM_REPO_PATHS")

# ---- 2. the commands of the flow (dry run with stand-in tools) -------------------------------
set(fake VPP=${TRUE_EXE} PLATFORMINFO=${TRUE_EXE} EMCONFIGUTIL=${TRUE_EXE} BUILD_DIR=${WORK})
run_make(rc text ${MAKE} -n -C ${ROOT}/flows hw ${fake})
if(NOT rc EQUAL 0)
  message(SEND_ERROR "make -n hw with stand-in tools failed (${rc})\n${text}")
endif()
expect_contains("hw compile" "${text}" "${TRUE_EXE} -c -t hw --platform ${platform} -k csd_update")
expect_contains("hw compile" "${text}" "-I${ROOT}/hls/include -I${ROOT}/hls/kernels")
expect_contains("hw compile" "${text}" "--hls.pre_tcl ${ROOT}/flows/hls/csd_update_pre.tcl")
expect_contains("hw compile" "${text}" "--hls.clock 250000000:csd_update")
expect_contains("hw compile" "${text}" "-o ${WORK}/hw/csd_update.xo ${ROOT}/hls/kernels/csd_update.cpp")
expect_contains("hw link" "${text}"
  "${TRUE_EXE} -l -t hw --platform ${platform} --config ${ROOT}/flows/generated/csd_update.connectivity.cfg")
expect_contains("hw link" "${text}" "-o ${WORK}/hw/csd_update.xclbin ${WORK}/hw/csd_update.xo")
expect_contains("hw check" "${text}" "xclbin check ${WORK}/hw/csd_update.xclbin --platform ${platform}")
string(FIND "${text}" "hls/shim" shim)
if(NOT shim EQUAL -1)
  message(SEND_ERROR "the Vitis compile must not see hls/shim (Vitis has its own hls_vector.h)\n${text}")
endif()

run_make(rc text ${MAKE} -n -C ${ROOT}/flows hw_emu ${fake})
if(NOT rc EQUAL 0)
  message(SEND_ERROR "make -n hw_emu with stand-in tools failed (${rc})\n${text}")
endif()
expect_contains("hw_emu compile" "${text}" "-c -t hw_emu --platform ${platform} -k csd_update")
expect_contains("hw_emu link" "${text}" "-l -t hw_emu --platform ${platform}")
expect_contains("hw_emu emconfig" "${text}" "${TRUE_EXE} --platform ${platform} --od ${WORK}/hw_emu")
