# xclbin handling (csdkit/platform/xclbin.h): inspect and check an xclbin through XRT's parser and
# write the emulated SmartSSD's xclbin. Included by host/CMakeLists.txt. Sources in src/:
#
#   xclbin_container.cpp  axlf structural validation (before XRT reads a file), shared helpers
#   kernel_xml.cpp        kernel XML reader, KernelSignature, ParseKernelXml, CompareSignatures
#   xclbin_inspect.cpp    InspectXclbin and CheckXclbin (through xrt::xclbin)
#   xclbin_writer.cpp     WriteEmulationXclbin
#   xclbin_internal.h     what they share (private; not installed, not on the include path)
#
# The flow inputs generated from the argument table (kernel.xml, v++ connectivity) are the flows'
# generator's (flows/tools/flow_files.h, flows/flows.cmake).
#
# Needs Debian's libxrt-dev (headers under <include>/xrt, libxrt_coreutil) and uuid-dev, found by
# the top-level CMakeLists.txt (CSDKIT_WITH_XRT; without them this file is not included).
# xrt::xclbin parses files without a device or a driver.

add_library(csdkit_xclbin STATIC
  ${CMAKE_CURRENT_LIST_DIR}/src/xclbin_container.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/kernel_xml.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/xclbin_inspect.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/xclbin_writer.cpp)
target_include_directories(csdkit_xclbin PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# XRT's headers stay private: the public header exposes only nlohmann::json and std types.
target_include_directories(csdkit_xclbin SYSTEM PRIVATE ${CSDKIT_XRT_XCLBIN_INCLUDE_DIR})
target_link_libraries(csdkit_xclbin
  PUBLIC csdkit_hls nlohmann_json::nlohmann_json
  PRIVATE ${CSDKIT_XRT_COREUTIL_LIBRARY} ${CSDKIT_UUID_LIBRARY})
target_compile_definitions(csdkit_xclbin PRIVATE CSDKIT_VERSION="${PROJECT_VERSION}")
# No floating point here; the model flags keep warnings and -march consistent with the rest.
target_compile_options(csdkit_xclbin PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

# The flows' generator and consistency checker use this library (flows/flows.cmake).
include(${PROJECT_SOURCE_DIR}/flows/flows.cmake OPTIONAL)
