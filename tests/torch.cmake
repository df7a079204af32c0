# Statistical cross-check of one optimizer step against PyTorch's own optimizers (AdamW, Adam,
# SGD, Adagrad; Lion against the lion-pytorch formulation): bounded ulp distance, not bitwise
# (ARCHITECTURE.md, "Numeric contract"). Debian's python3-torch is importable only from
# /usr/bin/python3; without it the script exits 77 and ctest reports the test as skipped.
if(EXISTS /usr/bin/python3)
  add_test(NAME torch_one_step
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/torch/check_torch_step.py
                   $<TARGET_FILE:csdkit>)
  set_tests_properties(torch_one_step PROPERTIES LABELS quick SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
