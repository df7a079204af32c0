# Tools of the Vitis flows that build and run without Vitis (included by
# host/platform/xclbin.cmake):
#
#   csdkit_flow_files_lib   tools/flow_files.{h,cpp}: the text of kernel.xml, the v++ connectivity
#                           config and the packaging interface list for a kernel signature
#   csdkit_gen_flow_files   tools/gen_flow_files.cpp: writes those files from the argument table;
#                           target csdkit_flow_files runs it into <build>/flows/generated on
#                           every build
#   csdkit_flows_check      tools/check_flows.cpp: checks the HLS top, flows/generated, the HLS
#                           configs, the packaging script and (when present) the RTL registers
#                           against the table
#
# The ctests using them are registered by tests/xclbin.cmake.

add_library(csdkit_flow_files_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/tools/flow_files.cpp)
target_include_directories(csdkit_flow_files_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR}/tools)
target_link_libraries(csdkit_flow_files_lib PUBLIC csdkit_xclbin)
target_compile_options(csdkit_flow_files_lib PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

add_executable(csdkit_gen_flow_files ${CMAKE_CURRENT_LIST_DIR}/tools/gen_flow_files.cpp)
target_link_libraries(csdkit_gen_flow_files PRIVATE csdkit_flow_files_lib)
target_compile_options(csdkit_gen_flow_files PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

add_executable(csdkit_flows_check ${CMAKE_CURRENT_LIST_DIR}/tools/check_flows.cpp)
target_link_libraries(csdkit_flows_check PRIVATE csdkit_xclbin)
target_compile_options(csdkit_flows_check PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

set(CSDKIT_FLOWS_GENERATED_DIR ${PROJECT_BINARY_DIR}/flows/generated)
add_custom_command(
  OUTPUT ${CSDKIT_FLOWS_GENERATED_DIR}/kernel.xml
         ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update.connectivity.cfg
         ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update_ports.tcl
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CSDKIT_FLOWS_GENERATED_DIR}
  COMMAND csdkit_gen_flow_files --out ${CSDKIT_FLOWS_GENERATED_DIR}
  # The generator leaves unchanged files alone; the build still needs them newer than it.
  COMMAND ${CMAKE_COMMAND} -E touch ${CSDKIT_FLOWS_GENERATED_DIR}/kernel.xml
          ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update.connectivity.cfg
          ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update_ports.tcl
  DEPENDS csdkit_gen_flow_files
  COMMENT "Generating kernel.xml and the v++ connectivity config from the argument table"
  VERBATIM)
add_custom_target(csdkit_flow_files ALL
  DEPENDS ${CSDKIT_FLOWS_GENERATED_DIR}/kernel.xml
          ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update.connectivity.cfg
          ${CSDKIT_FLOWS_GENERATED_DIR}/csd_update_ports.tcl)
