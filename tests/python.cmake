# The Python package against torch.optim (tests/python, pytest), with the build's package root
# on PYTHONPATH. Debian's python3-torch and python3-pytest live under /usr/bin/python3 only.
# pytest's temporary stores go under the build tree (--basetemp, emptied on each run); no
# cache is written into the source tree.
if(TARGET csdkit_py AND EXISTS /usr/bin/python3)
  add_test(NAME python_pytest
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -m "not nightly"
                   --basetemp=${CMAKE_CURRENT_BINARY_DIR}/python_tmp
                   ${CMAKE_CURRENT_SOURCE_DIR}/python)
  # COST: the longest quick test (about 300 s on two cores) is started first, so that a
  # fresh build tree (no ctest cost data yet) does not end on it alone.
  set_tests_properties(python_pytest PROPERTIES LABELS quick TIMEOUT 1800 COST 1000
                       ENVIRONMENT "PYTHONPATH=${CSDKIT_PYTHON_DIR}")
  # Further variants of what the quick tests cover (pytest marker "nightly").
  add_test(NAME python_pytest_nightly
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -m nightly
                   --basetemp=${CMAKE_CURRENT_BINARY_DIR}/python_tmp_nightly
                   ${CMAKE_CURRENT_SOURCE_DIR}/python)
  set_tests_properties(python_pytest_nightly PROPERTIES LABELS nightly TIMEOUT 1800
                       ENVIRONMENT "PYTHONPATH=${CSDKIT_PYTHON_DIR}")
endif()
