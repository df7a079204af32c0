# `csdkit bench io`: the libaio engine against fio on one file (same block size and queue depth).
# Paths are relative to this file, so it can be included from bench/CMakeLists.txt or elsewhere.
add_library(csdkit_io_bench STATIC ${CMAKE_CURRENT_LIST_DIR}/io_bench.cpp)
target_include_directories(csdkit_io_bench PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(csdkit_io_bench PUBLIC csdkit_aio csdkit_platform nlohmann_json::nlohmann_json)
target_compile_options(csdkit_io_bench PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)
