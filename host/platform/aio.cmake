# The libaio storage engine (O_DIRECT files <-> host memory), included by host/CMakeLists.txt.
# Public headers: host/include/csdkit/aio/. The engine talks to the kernel only through
# KernelAio (io_context.h), so tests can put a fault-injecting layer underneath.
add_library(csdkit_aio STATIC
  ${CMAKE_CURRENT_LIST_DIR}/aio/aio_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aio/aio_engine.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aio/fault_injection.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aio/file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aio/io_context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aio/io_error.cpp)
target_include_directories(csdkit_aio PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(csdkit_aio PUBLIC aio Threads::Threads nlohmann_json::nlohmann_json)
# No floating point here; the model flags only keep warnings and -march consistent.
target_compile_options(csdkit_aio PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)
