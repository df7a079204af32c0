# The runtime over emulated SmartSSDs: equivalence, traffic, durability, refusals.
csdkit_test(runtime_test)
target_link_libraries(runtime_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(runtime_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/runtime_test_stores")
gtest_discover_tests(runtime_test PROPERTIES LABELS quick TIMEOUT 600 COST 20 DISCOVERY_TIMEOUT 60)

# Stores in the compressed state formats (q8, q8-bf16): smart = baseline, bytes per link.
csdkit_test(state_q8_store_test)
target_link_libraries(state_q8_store_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(state_q8_store_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/state_q8_store_test_stores")
gtest_discover_tests(state_q8_store_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# SmartSSD discovery by PCIe topology on fake sysfs trees.
csdkit_test(topology_test)
target_link_libraries(topology_test PRIVATE csdkit_platform)
target_compile_definitions(topology_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/topology_test_trees")
gtest_discover_tests(topology_test PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

# Stores of a trainer's model: layout, weights in, per-group hyper-parameters.
csdkit_test(model_store_test)
target_link_libraries(model_store_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(model_store_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/model_store_test_stores")
gtest_discover_tests(model_store_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

csdkit_test(state_io_test)
target_link_libraries(state_io_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(state_io_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/state_io_test_stores")
gtest_discover_tests(state_io_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# The host threads of the baseline and of bench kernel.
csdkit_test(worker_pool_test)
target_link_libraries(worker_pool_test PRIVATE csdkit_platform)
gtest_discover_tests(worker_pool_test PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)

# Store::RollBack: a store one commit ahead of its peers returns to their step.
csdkit_test(store_rollback_test)
target_link_libraries(store_rollback_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(store_rollback_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/store_rollback_test_stores")
gtest_discover_tests(store_rollback_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# The null (planning) device: the same step as on emulated devices, traffic formulas,
# determinism, a 33e9-parameter plan in bounded memory.
csdkit_test(null_device_test)
target_link_libraries(null_device_test PRIVATE csdkit_runtime csdkit_system csdkit_emu)
target_compile_definitions(null_device_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/null_device_test_stores")
gtest_discover_tests(null_device_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# The planner: a planned step is the emulated step exactly; phases, determinism, refusals.
csdkit_test(planner_test)
target_link_libraries(planner_test PRIVATE csdkit_planner csdkit_runtime csdkit_system)
target_compile_definitions(planner_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/planner_test_stores")
gtest_discover_tests(planner_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# Integrity from the kernel's status word: input CRCs against the manifest (a bit flipped on
# the device is refused), output CRCs into it, the divergence guard.
csdkit_test(integrity_test)
target_link_libraries(integrity_test PRIVATE csdkit_runtime csdkit_system)
target_compile_definitions(integrity_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/integrity_test_stores")
gtest_discover_tests(integrity_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)

# Hostile use of stores and commands (issue 25): the lock on the store directory, symbolic
# links refused, bounded JSON, commands that write only what they create. Runs the built csdkit.
csdkit_test(hostile_test)
target_link_libraries(hostile_test PRIVATE csdkit_runtime)
add_dependencies(hostile_test csdkit)
target_compile_definitions(hostile_test PRIVATE
  CSDKIT_TEST_DIR="${CMAKE_CURRENT_BINARY_DIR}/hostile_test_stores"
  CSDKIT_CLI="$<TARGET_FILE:csdkit>")
gtest_discover_tests(hostile_test PROPERTIES LABELS quick TIMEOUT 600 DISCOVERY_TIMEOUT 60)
