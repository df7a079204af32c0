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
  "loss_scale_fp16|init~--dir~${csdkit_cli_dir}/none~--loss-scale~70000|--loss-scale: expected a value in \\(0, 65504. for --grad fp16"
  "loss_scale_binary32|init~--dir~${csdkit_cli_dir}/none~--grad~fp32~--loss-scale~1e-39|loss scale: expected a value > 0 whose value and reciprocal are finite as binary32, found 1e-39"
  "threads_huge|step~--dir~${csdkit_cli_dir}/none~--mode~baseline~--threads~200000|--threads: expected a whole number in \\[1, 1024\\], found 200000"
  "topk_nan|step~--dir~${csdkit_cli_dir}/none~--topk~nan|--topk: expected a finite"
  "reps_zero|bench~step~--reps~0|--reps: expected a whole number in \\[1, 1000\\], found 0"
  "trace_dir|kernel~--backend~rtl~--n~64~--trace~${csdkit_cli_dir}/none/x.fst|--trace '.*': expected a file in an existing directory"
  "trace_backend|kernel~--n~64~--trace~x.fst|--trace: expected --backend rtl"
  "replay_problem_option|kernel~--replay~${csdkit_cli_dir}/none~--n~64|--replay: expected only --json and device options with it .*, found --n")
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

# Stores at the edges of the host: 256 devices keep 1536 files open (the soft limit of 1024 is
# raised; a hard limit too small is refused up front, naming both figures), and --json output
# for a store whose path is not UTF-8 still reports the committed step (exit 0).
set(csdkit_cli_256 ${csdkit_cli_dir}/devices256)
add_test(NAME cli_store_256_devices COMMAND sh -c
  "rm -rf '${csdkit_cli_256}' && mkdir -p '${csdkit_cli_dir}' && ulimit -Sn 1024 && \
   '$<TARGET_FILE:csdkit>' init --dir '${csdkit_cli_256}' --devices 256 --params 300000 && \
   '$<TARGET_FILE:csdkit>' step --dir '${csdkit_cli_256}' && \
   (ulimit -n 900; '$<TARGET_FILE:csdkit>' step --dir '${csdkit_cli_256}'; test $? -eq 2)")
set_tests_properties(cli_store_256_devices PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "committed step 1.*expected room for 1536 open files .* raise it with `ulimit -n [0-9]+`"
  FAIL_REGULAR_EXPRESSION "committed step 2")
add_test(NAME cli_json_non_utf8_path COMMAND sh -c
  "d=\"${csdkit_cli_dir}/$(printf 'bytes\\377')\" && rm -rf \"$d\" && mkdir -p \"$d\" && \
   '$<TARGET_FILE:csdkit>' init --dir \"$d/s\" --params 200000 --devices 2 --json > /dev/null && \
   '$<TARGET_FILE:csdkit>' step --dir \"$d/s\" --json")
set_tests_properties(cli_json_non_utf8_path PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "\"committed_step\": 1")
