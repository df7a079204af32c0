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
  "bench_pages|bench~kernel~--pages~2m|--pages: 2m not in \\{thp,4k\\}"
  "trace_dir|kernel~--backend~rtl~--n~64~--trace~${csdkit_cli_dir}/none/x.fst|--trace '.*': expected a file in an existing directory"
  "trace_backend|kernel~--n~64~--trace~x.fst|--trace: expected --backend rtl"
  "replay_problem_option|kernel~--replay~${csdkit_cli_dir}/none~--n~64|--replay: expected only --json and device options with it .*, found --n"
  "overflow_negative|step~--dir~${csdkit_cli_dir}/none~--overflow-at~-1|--overflow-at: expected a whole number in \\[1, 9223372036854775807\\], found '-1'"
  "overflow_huge|step~--dir~${csdkit_cli_dir}/none~--overflow-at~99999999999999999999|--overflow-at: expected a whole number in \\[1, 9223372036854775807\\], found 99999999999999999999"
  "bench_step_dir_file|bench~step~--dir~${CMAKE_CURRENT_SOURCE_DIR}/cli.cmake|--dir: expected an absent or empty directory, found '.*/cli.cmake', which is not a directory"
  "null_overflow|step~--dir~${csdkit_cli_dir}/none~--backend~null~--overflow-at~1|--overflow-at: expected a backend that moves data, found --backend null"
  "null_dump|step~--dir~${csdkit_cli_dir}/none~--backend~null~--dump-launches~${csdkit_cli_dir}/none|--dump-launches: expected a backend that moves data, found --backend null"
  "null_kernel|kernel~--backend~null~--n~64|--backend: null not in \\{model,rtl,opencl\\}"
  "plan_no_model|plan|model: expected --params N or --layers L --hidden H, found neither"
  "plan_params|plan~--params~4X|--params: expected a parameter count such as 350000000, 350M, 4e9 or 4.0B \\(1 to 2\\^40\\), found '4X'"
  "plan_both_models|plan~--params~1B~--layers~12~--hidden~768|expected one way to give the model, found both"
  "plan_devices|plan~--params~1B~--devices~0-3|--devices: expected counts in \\[1, 256\\] as N, N,M,... or A-B, found '0-3'"
  "plan_gpu|plan~--params~1B~--gpu~a5000|--gpu/--batch: expected one of the profile table's \\(h100 batch 4, h100 batch 16\\), found a5000 batch 4"
  "plan_uplink|plan~--params~1B~--uplink~gen9|--uplink: expected gen3, gen4, gen5 \\(PCIe x16\\) or a bandwidth in GB/s in .0, 10000., found 'gen9'"
  "plan_paper_kit|plan~--paper~--system~kit|--paper: expected --system paper .*, found --system kit"
  "plan_topk|plan~--params~1B~--topk~0|--topk: expected a finite"
  "plan_host_copy|plan~--params~1B~--host-copy~0|--host-copy: expected a finite in .0, 10000., found '0'"
  "plan_bwd_ratio|plan~--params~1B~--bwd-ratio~-1|--bwd-ratio: expected a finite in .0, 100., found '-1'"
  "plan_overlap|plan~--params~1B~--overlap~full|--overlap: full not in \\{none,weights,grads,step\\}"
  "plan_host_path|plan~--params~1B~--host-path~fast|--host-path: fast not in \\{gpu,dev,none\\}")
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
# bench kernel on 4 KiB pages reports the page kind and, for a dense configuration, the memory
# bound of its own access pattern measured beside it, and with several threads each run's spread
# of thread times (a run lasts as long as its slowest thread), the update's and the bound's (a
# smoke run: tiny n, two threads).
add_test(NAME cli_bench_kernel_pages COMMAND csdkit bench kernel --quick --n 65536 --min-threads 2
         --threads 2 --reps 1 --no-general --no-torch --pages 4k --json)
set_tests_properties(cli_bench_kernel_pages PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "\"pages\": \"4k\".*\"fraction_of_pattern_bound\": [0-9.e+-]+,.*\"pattern_bound\": {\n *\"bandwidth_gbs\".*\"shape\": \"[a-z0-9_]+\",\n *\"thread_seconds\": {\n *\"max\": [0-9.e+-]+,\n *\"median\": [0-9.e+-]+,\n *\"min\": [0-9.e+-]+\n *}.*\"threads\": 2")

add_test(NAME cli_json_non_utf8_path COMMAND sh -c
  "d=\"${csdkit_cli_dir}/$(printf 'bytes\\377')\" && rm -rf \"$d\" && mkdir -p \"$d\" && \
   '$<TARGET_FILE:csdkit>' init --dir \"$d/s\" --params 200000 --devices 2 --json > /dev/null && \
   '$<TARGET_FILE:csdkit>' step --dir \"$d/s\" --json")
set_tests_properties(cli_json_non_utf8_path PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "\"committed_step\": 1")

# `step --dump-launches`: every launch of a step as golden vectors. The same step of copies of
# one store in the smart mode on the host model, in the baseline and in the smart mode on OpenCL
# devices (two launches chosen with --dump-only) dumps the same bytes launch by launch, and every
# dump replays identical on the other backends (the RTL when the build has it). The step's link
# bytes are those of the same step without a dump.
set(csdkit_step_dump_dir ${CMAKE_CURRENT_BINARY_DIR}/step_dumps)
add_test(NAME cli_step_dump_replay COMMAND sh -c [=[
  B="$1"; rtl="$3"
  rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
  "$B" init --dir s --devices 2 --params 200000 --subgroup 65536 --grad fp16 --out fp16 > /dev/null &&
  "$B" step --dir s > /dev/null && cp -r s s2 && cp -r s s3 && cp -r s s4 || exit 1
  "$B" step --dir s --topk 0.05 --dump-launches smart --json > smart.json &&
  "$B" step --dir s4 --topk 0.05 --json > plain.json &&
  "$B" step --dir s2 --topk 0.05 --mode baseline --dump-launches base &&
  "$B" step --dir s3 --topk 0.05 --backend opencl --dump-launches cl --dump-only 1:0,0:1 || exit 1
  bytes() { tr -d ' \n' < "$1" | grep -o '"bytes":{[^}]*}'; }
  [ "$(bytes smart.json)" = "$(bytes plain.json)" ] || { echo "link bytes differ"; exit 1; }
  echo "smart launches: $(ls smart/step-2 | tr '\n' ' ')"
  echo "opencl launches: $(ls cl/step-2 | tr '\n' ' ')"
  for x in smart/step-2/*; do
    for f in "$x"/*.bin; do
      g="base/step-2/${x##*/}/${f##*/}"
      cmp "$f" "$g" || { echo "smart and baseline launches differ: $f $g"; exit 1; }
      h="cl/step-2/${x##*/}/${f##*/}"
      [ ! -d "${h%/*}" ] || cmp "$f" "$h" || { echo "model and opencl differ: $f $h"; exit 1; }
    done
  done
  replay() {
    out=$("$B" kernel --replay "$1" --backend "$2") || { echo "$out"; exit 1; }
    echo "$out" | grep -q "output buffers identical to the dump" || { echo "$out"; exit 1; }
    echo "replayed $1 on $2"
  }
  for x in smart/step-2/*; do replay "$x" opencl; done
  replay base/step-2/device-1-subgroup-1 model
  replay cl/step-2/device-0-subgroup-1 model
  [ "$rtl" != 1 ] || replay smart/step-2/device-0-subgroup-0 rtl
  echo "step dumps agree"]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_step_dump_dir}/replay $<TARGET_EXISTS:csdkit_rtl_kernel>)
set_tests_properties(cli_step_dump_replay PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "smart launches: device-0-subgroup-0 device-0-subgroup-1 device-1-subgroup-0 device-1-subgroup-1 \nopencl launches: device-0-subgroup-1 device-1-subgroup-0 \n.*step dumps agree")

# Refusals of --dump-launches / --dump-only (exit 2, nothing committed, nothing written).
add_test(NAME cli_step_dump_refusals COMMAND sh -c [=[
  B="$1"
  rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
  "$B" init --dir s --devices 2 --params 200000 --subgroup 65536 > /dev/null || exit 1
  mkdir full && touch full/mine && touch plainfile || exit 1
  try() { "$B" step --dir s "$@"; echo "exit status $?"; }
  try --dump-launches full
  try --dump-launches plainfile
  try --dump-launches no/such/parent
  try --dump-launches d1 --dump-only 2:0
  try --dump-launches d2 --dump-only 0:2
  try --dump-launches d3 --dump-only 0-1
  try --dump-only 0:0
  [ -f full/mine ] && [ "$(ls full)" = mine ] && [ ! -e d1 ] && [ ! -e d2 ] && [ ! -e d3 ] || exit 1
  "$B" info --dir s | grep -o "step [0-9]*" | head -1]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_step_dump_dir}/refusals)
set_tests_properties(cli_step_dump_refusals PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "--dump-launches: expected a new or empty directory, found 'full' with files in it\nexit status 2\n.*--dump-launches: expected a new or empty directory, found 'plainfile', which is not a directory\nexit status 2\n.*--dump-launches: expected to create 'no/such/parent', found No such file or directory \\(its parent must exist\\)\nexit status 2\n.*--dump-only: expected a device below 2 \\(the store's\\), found 2:0\nexit status 2\n.*--dump-only: expected a subgroup of device 0 below 2, found 0:2\nexit status 2\n.*--dump-only: expected DEVICE:SUBGROUP \\(whole numbers, e.g. 0:3\\), found '0-1'\nexit status 2\n.*--dump-only requires --dump-launches.*exit status [12][0-9]*\n.*step 0"
  FAIL_REGULAR_EXPRESSION "committed step")

# The divergence guard: `step --clip 1e38` (finite, but its product with the gradients overflows
# binary32) is refused in both modes, naming the first element, exit 2, the store at its step;
# with --allow-nonfinite the step commits and says how many non-finite values it stored.
set(csdkit_step_guard_dir ${CMAKE_CURRENT_BINARY_DIR}/step_guard)
add_test(NAME cli_step_divergence_guard COMMAND sh -c [=[
  B="$1"
  rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
  "$B" init --dir s --devices 2 --params 200000 --subgroup 65536 > /dev/null || exit 1
  "$B" step --dir s > /dev/null || exit 1
  for mode in smart baseline; do
    "$B" step --dir s --mode $mode --threads 2 --clip 1e38; echo "exit status $?"
  done
  "$B" info --dir s --verify | grep -o "committed step [0-9]*" | head -1
  "$B" step --dir s --clip 1e38 --allow-nonfinite || exit 1
  "$B" info --dir s | grep -o "committed step [0-9]*" | head -1]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_step_guard_dir})
set_tests_properties(cli_step_divergence_guard PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "launch of device [01] subgroup [01]: the update wrote [0-9]+ non-finite values \\(NaN or infinity\\) into the weights or optimizer state, the first at subgroup element [0-9]+, parameter [0-9]+; the step was refused and nothing was committed \\(the store keeps step 1\\)[^\n]*\nexit status 2\n.*host update of device [01] subgroup [01]: the update wrote .*\nexit status 2\ncommitted step 1\n.*step 2: committed with [0-9]+ non-finite values in the weights or state \\(--allow-nonfinite\\)\ncommitted step 2")

# `step --backend null` plans the next step of a store on null devices: its bytes per link and
# virtual seconds equal those of the same step on emulated devices (SmartUpdate dense and Top-K,
# the baseline with 2 threads), and the store stays where it was.
set(csdkit_step_null_dir ${CMAKE_CURRENT_BINARY_DIR}/step_null)
add_test(NAME cli_step_null_equals_model COMMAND sh -c [=[
  B="$1"
  rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
  "$B" init --dir s --devices 4 --params 1000003 --subgroup 131072 > /dev/null || exit 1
  figures() { tr -d ' \n' < "$1" | grep -o '"bytes":{[^}]*}\|"virtual_seconds":[^,}]*' | tr '\n' ' '; }
  for args in "--mode smart" "--mode smart --topk 0.02" "--mode baseline --threads 2 --no-pin"; do
    "$B" step --dir s $args --backend null --json > plan.json || exit 1
    "$B" step --dir s $args --json > real.json || exit 1
    p=$(figures plan.json); r=$(figures real.json)
    [ -n "$p" ] && [ "$p" = "$r" ] || { echo "plan and step differ ($args): $p / $r"; exit 1; }
    echo "same figures: $args"
  done
  "$B" step --dir s --backend null > /dev/null || exit 1
  "$B" info --dir s | grep -o "committed step [0-9]*" | head -1]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_step_null_dir})
set_tests_properties(cli_step_null_equals_model PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "same figures: --mode smart\nsame figures: --mode smart --topk 0.02\nsame figures: --mode baseline --threads 2 --no-pin\n.*committed step 3")

# `csdkit plan`: the planned step of a configuration is, to the last digit of its JSON, the
# virtual seconds and the link bytes of the same step run by `csdkit step` on emulated devices,
# in each mode (smart without the handler is `step --serial`); and --plot writes two PNGs and
# plan.json, and refuses to overwrite them.
add_test(NAME cli_plan_equals_step COMMAND sh -c [=[
  B="$1"
  rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
  field() { tr -d ' \n' < "$1" | grep -o "\"$2\":[^,}]*" | head -n 1 | cut -d: -f2; }
  links() { tr -d ' \n' < "$1" | grep -o "\"$2\":{[^}]*}" | cut -d: -f2-; }
  for m in baseline smart handler topk; do
    rm -rf s && "$B" init --dir s --devices 3 --params 1000000 --subgroup 65536 --grad fp16 \
      --out fp16 --loss-scale 1024 > /dev/null || exit 1
    case $m in
      baseline) a="--mode baseline --threads 8" ;; smart) a="--serial" ;;
      handler) a="" ;; topk) a="--topk 0.05" ;;
    esac
    "$B" step --dir s $a --no-pin --json > step.json || exit 1
    "$B" plan --params 1000000 --devices 3 --subgroup 65536 --modes $m --topk 0.05 \
      --host-threads 8 --json > plan.json || exit 1
    s=$(field step.json virtual_seconds); p=$(field plan.json step)
    [ -n "$s" ] && [ "$s" = "$p" ] || { echo "$m: step $s s, plan $p s"; exit 1; }
    [ -n "$(links step.json bytes)" ] &&
      [ "$(links step.json bytes)" = "$(links plan.json step_bytes)" ] || {
      echo "$m: bytes differ: $(links step.json bytes) vs $(links plan.json step_bytes)"; exit 1; }
    echo "$m: $s s, $(links plan.json step_bytes)"
  done
  echo "plan equals step"
]=] sh $<TARGET_FILE:csdkit> ${CMAKE_CURRENT_BINARY_DIR}/cli_plan)
set_tests_properties(cli_plan_equals_step PROPERTIES LABELS quick
                     PASS_REGULAR_EXPRESSION "plan equals step")
if(DEFINED Python_EXECUTABLE)
  add_test(NAME cli_plan_plot COMMAND sh -c [=[
    B="$1"
    rm -rf "$2" && mkdir -p "$2" && cd "$2" || exit 1
    "$B" plan --system paper --params 4B --fwd-bwd 5 --devices 1-4,10 --plot out > /dev/null ||
      exit 1
    for f in speedup breakdown; do
      head -c 8 out/$f.png | od -An -tx1 | tr -d ' \n' | grep -q '^89504e470d0a1a0a$' ||
        { echo "out/$f.png is not a PNG"; exit 1; }
    done
    grep -q '"mode": "topk"' out/plan.json || { echo "plan.json has no topk point"; exit 1; }
    cp out/speedup.png keep.png
    "$B" plan --params 1B --plot out; echo "exit status $?"
    cmp out/speedup.png keep.png && echo "left as it was"
  ]=] sh $<TARGET_FILE:csdkit> ${CMAKE_CURRENT_BINARY_DIR}/cli_plan_plot)
  set_tests_properties(cli_plan_plot PROPERTIES LABELS quick PASS_REGULAR_EXPRESSION
    "--plot: expected a directory without plan.json, found out/plan.json .*exit status 2.*left as it was")
endif()
