# xclbin handling and the Vitis flows (host/platform/xclbin.cmake, flows/). All quick; none needs
# Vitis, Vivado or a card. Test names start with "xclbin." (gtest) or "flows_" / "xclbin_cli_".
#
#   xclbin.*              the library: emulated xclbin round trip through XRT, every kind of
#                         mismatch refused, truncated / random / corrupted files refused; the
#                         flow inputs (flows/tools/flow_files.h) read back
#   flows_generated       flows/generated/ equals what the argument table generates
#   flows_consistency     HLS top, kernel.xml, connectivity, HLS configs, packaging script vs table
#   flows_rtl_registers   the RTL register package and top ports vs table (skipped until present)
#   flows_tcl_syntax      parse-only check of the flows' Tcl with tclsh (if installed)
#   flows_makefile        flows/Makefile: missing-tool refusals and the dry-run v++ commands
#   xclbin_cli_*          `csdkit xclbin emu | check | inspect` (once the command is wired in)

csdkit_test(xclbin_test)
# The flow inputs' tests (FlowFiles.*) need the flows' generator library.
target_link_libraries(xclbin_test PRIVATE csdkit_xclbin csdkit_flow_files_lib)
target_compile_definitions(xclbin_test PRIVATE
  CSDKIT_XCLBIN_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/xclbin_tmp")
gtest_discover_tests(xclbin_test TEST_PREFIX "xclbin." PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

add_test(NAME flows_generated
         COMMAND csdkit_gen_flow_files --check ${PROJECT_SOURCE_DIR}/flows/generated)
add_test(NAME flows_consistency COMMAND csdkit_flows_check --root ${PROJECT_SOURCE_DIR})
add_test(NAME flows_rtl_registers
         COMMAND csdkit_flows_check --root ${PROJECT_SOURCE_DIR} --rtl --search ${PROJECT_BINARY_DIR})
set_tests_properties(flows_generated flows_consistency flows_rtl_registers PROPERTIES LABELS quick)
set_tests_properties(flows_rtl_registers PROPERTIES SKIP_RETURN_CODE 77)

find_program(CSDKIT_TCLSH NAMES tclsh tclsh8.6)
if(CSDKIT_TCLSH)
  file(GLOB_RECURSE csdkit_flow_tcl CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/flows/*.tcl)
  add_test(NAME flows_tcl_syntax
           COMMAND ${CSDKIT_TCLSH} ${PROJECT_SOURCE_DIR}/flows/tools/tcl_syntax.tcl ${csdkit_flow_tcl})
  set_tests_properties(flows_tcl_syntax PROPERTIES LABELS quick)
else()
  message(STATUS "csdkit flows: tclsh not found (Debian: tcl); flows_tcl_syntax not registered")
endif()

find_program(CSDKIT_MAKE NAMES make gmake)
if(CSDKIT_MAKE)
  add_test(NAME flows_makefile
           COMMAND ${CMAKE_COMMAND} -DMAKE=${CSDKIT_MAKE} -DROOT=${PROJECT_SOURCE_DIR}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/flows_make
                   -P ${PROJECT_SOURCE_DIR}/flows/tools/make_check.cmake)
  set_tests_properties(flows_makefile PROPERTIES LABELS quick)
endif()

# The CLI, once host/cli/xclbin_cmd.cpp is part of the csdkit target (CSDKIT_XCLBIN_CLI names
# another executable target with the command, e.g. in a scratch build).
if(NOT CSDKIT_XCLBIN_CLI AND TARGET csdkit)
  get_target_property(csdkit_cli_sources csdkit SOURCES)
  if(csdkit_cli_sources MATCHES "xclbin_cmd.cpp")
    set(CSDKIT_XCLBIN_CLI csdkit)
  endif()
endif()
if(CSDKIT_XCLBIN_CLI)
  set(csdkit_xclbin_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/xclbin_cli)
  set(csdkit_xclbin_cli_file ${csdkit_xclbin_cli_dir}/emulated.xclbin)
  add_test(NAME xclbin_cli_setup COMMAND ${CMAKE_COMMAND} -E make_directory ${csdkit_xclbin_cli_dir})
  add_test(NAME xclbin_cli_emu COMMAND ${CSDKIT_XCLBIN_CLI} xclbin emu ${csdkit_xclbin_cli_file})
  add_test(NAME xclbin_cli_check COMMAND ${CSDKIT_XCLBIN_CLI} xclbin check ${csdkit_xclbin_cli_file}
                                         --platform csdkit_emulated_smartssd)
  add_test(NAME xclbin_cli_inspect COMMAND ${CSDKIT_XCLBIN_CLI} xclbin inspect --json ${csdkit_xclbin_cli_file})
  # Refusals: exit status 1 and the reason on stderr.
  add_test(NAME xclbin_cli_check_card
           COMMAND sh -c "out=$(\"$0\" xclbin check \"$1\" --platform \"$2\" 2>&1); rc=$?; \
echo \"$out\"; test $rc -eq 1 && echo \"$out\" | grep -q \"platform: expected $2\""
                   $<TARGET_FILE:${CSDKIT_XCLBIN_CLI}> ${csdkit_xclbin_cli_file}
                   xilinx_u2_gen3x4_xdma_gc_2_202110_1)
  add_test(NAME xclbin_cli_check_not_xclbin
           COMMAND sh -c "out=$(\"$0\" xclbin check \"$1\" 2>&1); rc=$?; echo \"$out\"; \
test $rc -eq 1 && echo \"$out\" | grep -q \"is not an xclbin\""
                   $<TARGET_FILE:${CSDKIT_XCLBIN_CLI}> ${PROJECT_SOURCE_DIR}/README.md)
  set_tests_properties(xclbin_cli_setup PROPERTIES FIXTURES_SETUP xclbin_cli_dir)
  set_tests_properties(xclbin_cli_emu PROPERTIES FIXTURES_REQUIRED xclbin_cli_dir
                       FIXTURES_SETUP xclbin_cli_file PASS_REGULAR_EXPRESSION "check passed")
  set_tests_properties(xclbin_cli_check PROPERTIES FIXTURES_REQUIRED xclbin_cli_file
                       PASS_REGULAR_EXPRESSION "^ok: .*29 arguments as in the argument table")
  set_tests_properties(xclbin_cli_inspect PROPERTIES FIXTURES_REQUIRED xclbin_cli_file
                       PASS_REGULAR_EXPRESSION "\"platform\": \"csdkit_emulated_smartssd\"")
  set_tests_properties(xclbin_cli_check_card PROPERTIES FIXTURES_REQUIRED xclbin_cli_file)
  set_tests_properties(xclbin_cli_setup xclbin_cli_emu xclbin_cli_check xclbin_cli_inspect
                       xclbin_cli_check_card xclbin_cli_check_not_xclbin PROPERTIES LABELS quick)
endif()
