# The OpenCL backend. The kernel for non-Xilinx OpenCL devices is hls/kernels/csd_update.cpp
# itself, compiled by clang as C++ for OpenCL into a SPIR binary (cl_khr_spir) and embedded.
find_program(CSDKIT_CLANG NAMES clang-14 clang REQUIRED)
set(_spir ${CMAKE_CURRENT_BINARY_DIR}/csd_update.spir.bc)
# The L1 headers the kernel includes, listed for Ninja (which ignores IMPLICIT_DEPENDS).
file(GLOB _csdkit_l1_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/hls/include/csdkit/hls/*.h)
add_custom_command(
  OUTPUT ${_spir}
  COMMAND ${CSDKIT_CLANG} -cl-std=clc++ -target spir64-unknown-unknown -emit-llvm -c -O2
          -Xclang -finclude-default-header -ffp-contract=off
          -cl-fp32-correctly-rounded-divide-sqrt -Wno-unknown-pragmas
          -I${PROJECT_SOURCE_DIR}/hls/shim/opencl -I${PROJECT_SOURCE_DIR}/hls/include
          -I${PROJECT_SOURCE_DIR}/hls/shim -I${PROJECT_SOURCE_DIR}/hls/kernels
          ${PROJECT_SOURCE_DIR}/hls/kernels/csd_update_cl.cpp -o ${_spir}
  DEPENDS ${PROJECT_SOURCE_DIR}/hls/kernels/csd_update_cl.cpp
          ${PROJECT_SOURCE_DIR}/hls/kernels/csd_update.cpp
          ${PROJECT_SOURCE_DIR}/hls/kernels/csd_update.h ${_csdkit_l1_headers}
  IMPLICIT_DEPENDS CXX ${PROJECT_SOURCE_DIR}/hls/kernels/csd_update.cpp
  COMMENT "csd_update as C++ for OpenCL -> SPIR"
  VERBATIM)
set(_embed ${CMAKE_CURRENT_BINARY_DIR}/csd_update_spir.cpp)
add_custom_command(
  OUTPUT ${_embed}
  COMMAND ${CMAKE_COMMAND} -DIN=${_spir} -DOUT=${_embed} -P ${CMAKE_CURRENT_LIST_DIR}/opencl/embed.cmake
  DEPENDS ${_spir} ${CMAKE_CURRENT_LIST_DIR}/opencl/embed.cmake
  COMMENT "embedding the SPIR binary"
  VERBATIM)
add_library(csdkit_opencl STATIC ${CMAKE_CURRENT_LIST_DIR}/opencl/opencl_device.cpp ${_embed})
target_link_libraries(csdkit_opencl PUBLIC csdkit_platform csdkit_xclbin OpenCL::OpenCL ZLIB::ZLIB)
target_include_directories(csdkit_opencl PRIVATE ${XRT_INCLUDE_DIR})
target_compile_options(csdkit_opencl PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)
