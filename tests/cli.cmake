# The csdkit command's refusals of bad input: each case runs the command and passes when its
# output names the option, what was expected and what was found (exit status 2 comes with the
# message; the store directory `cli_refusals/none` is never created).
set(csdkit_cli_dir ${CMAKE_CURRENT_BINARY_DIR}/cli_refusals)
set(csdkit_cli_cases
  "devices_zero|init~--dir~${csdkit_cli_dir}/none~--devices~0|--devices: expected a whole number in \\[1, 256\\], found 0"
  "params_negative|init~--dir~${csdkit_cli_dir}/none~--params~-1|--params: expected a whole number in \\[1, [0-9]+\\], found '-1'"
  "params_fraction|init~--dir~${csdkit_cli_dir}/none~--params~2000000.5|found '2000000.5'"
  "seed_negative|init~--dir~${csdkit_cli_dir}/none~--seed~-1|--seed: expected a whole number"
  "lr_binary32|init~--dir~${csdkit_cli_dir}/none~--lr~1e39|lr: expected a value finite as binary32"
  "lr_scalar|init~--dir~${csdkit_cli_dir}/none~--lr~3e38|kernel scalar lr = lr / \\(1 - beta1\\^t\\)"
  "topk_nan|step~--dir~${csdkit_cli_dir}/none~--topk~nan|--topk: expected a finite"
  "reps_zero|bench~step~--reps~0|--reps: expected a whole number in \\[1, 1000\\], found 0"
  "trace_dir|kernel~--backend~rtl~--n~64~--trace~${csdkit_cli_dir}/none/x.fst|--trace '.*': expected a file in an existing directory"
  "trace_backend|kernel~--n~64~--trace~x.fst|--trace: expected --backend rtl")
# Each case: name|arguments separated by ~|a regular expression the output must match.
foreach(c IN LISTS csdkit_cli_cases)
  string(FIND "${c}" "|" a)
  string(FIND "${c}" "|" b REVERSE)
  string(SUBSTRING "${c}" 0 ${a} name)
  math(EXPR a1 "${a} + 1")
  math(EXPR alen "${b} - ${a1}")
  math(EXPR b1 "${b} + 1")
  string(SUBSTRING "${c}" ${a1} ${alen} args)
  string(SUBSTRING "${c}" ${b1} -1 expect)
  string(REPLACE "~" ";" args "${args}")
  add_test(NAME cli_refuses_${name} COMMAND csdkit ${args})
  set_tests_properties(cli_refuses_${name} PROPERTIES LABELS quick
                       PASS_REGULAR_EXPRESSION "${expect}")
endforeach()
