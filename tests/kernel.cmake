# Kernel-level tests: the L2 top against the plain reference, the sparse format, the rules
# against double precision, the argument table against the HLS source, and the CRC-32 of the
# status word's integrity lanes against zlib.
add_library(csdkit_test_util STATIC ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cpp)
target_link_libraries(csdkit_test_util PUBLIC csdkit_platform csdkit_runtime)
target_include_directories(csdkit_test_util PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(csdkit_test_util PRIVATE ${CSDKIT_MODEL_FLAGS} -O2)

foreach(t kernel_test state_q8_kernel_test datapath_test sparse_test rules_test args_table_test crc_test)
  csdkit_test(${t})
  target_link_libraries(${t} PRIVATE csdkit_test_util)
  gtest_discover_tests(${t} PROPERTIES LABELS quick DISCOVERY_TIMEOUT 60)
endforeach()
target_compile_definitions(args_table_test PRIVATE
  CSDKIT_KERNEL_SOURCE="${PROJECT_SOURCE_DIR}/hls/kernels/csd_update.cpp")

add_test(NAME args_table_doc
         COMMAND ${CMAKE_COMMAND} -DCSDKIT=$<TARGET_FILE:csdkit>
                 -DDOC=${PROJECT_SOURCE_DIR}/docs/kernel-interface.md
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/args_doc_check.cmake)
set_tests_properties(args_table_doc PROPERTIES LABELS quick)

# A launch larger than the machine's available memory is refused before anything is allocated
# (2^32 - 1 fp32 elements of AdamW need 64 GiB), with exit status 2.
add_test(NAME cli_kernel_refuses_more_than_memory
         COMMAND csdkit kernel --n 4294967295 --grad fp32 --out none)
set_tests_properties(cli_kernel_refuses_more_than_memory PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "expected a launch that fits in memory; it needs [0-9.]+ GiB")

# Golden vectors (`csdkit kernel --dump` and `--replay`, docs/kernel-interface.md). Round trips:
# a dump made on each backend of the build, on random and on special data, replays identical on
# that backend and on the host model (exit 0, every output buffer "identical"). RTL cases are
# skipped (exit 77) in a build without the Verilated kernel.
set(csdkit_golden_dir ${CMAKE_CURRENT_BINARY_DIR}/golden)
set(csdkit_golden_round_trips
  "random|--data random --optimizer adamw --grad fp16 --out bf16 --topk 0.25"
  "special|--data special --optimizer adam --weight-decay 0.01 --step 3 --grad fp32 --out fp16 --ftz"
  "special_sparse|--data special --optimizer lion --grad bf16 --topk 0.3")
foreach(backend model rtl opencl)
  foreach(c IN LISTS csdkit_golden_round_trips)
    string(FIND "${c}" "|" bar)
    string(SUBSTRING "${c}" 0 ${bar} name)
    math(EXPR bar "${bar} + 1")
    string(SUBSTRING "${c}" ${bar} -1 args)
    add_test(NAME kernel_replay_${backend}_${name} COMMAND sh -c [=[
      [ "$5" = 1 ] || { echo "no $3 backend in this build"; exit 77; }
      d="$2" && rm -rf "$d" && mkdir -p "$(dirname "$d")" &&
      "$1" kernel --backend "$3" --n 1111 --seed 7 $4 --dump "$d" > /dev/null || exit 1
      for b in "$3" model; do
        out=$("$1" kernel --replay "$d" --backend "$b") || { echo "$out"; exit 1; }
        echo "$out"
        echo "$out" | grep -q "output buffers identical to the dump" || exit 1
      done]=]
      sh $<TARGET_FILE:csdkit> ${csdkit_golden_dir}/${backend}_${name} ${backend} "${args}"
      $<IF:$<STREQUAL:${backend},rtl>,$<TARGET_EXISTS:csdkit_rtl_kernel>,1>)
    set_tests_properties(kernel_replay_${backend}_${name} PROPERTIES LABELS quick
                         SKIP_RETURN_CODE 77)
  endforeach()
endforeach()

# One bit flipped in a dumped output (bit 2 of element 37 of theta.out.bin, in a copy of the
# dump): the replay exits 1 and names the buffer, the element, expected, actual and the inputs,
# in text and in JSON; the other buffers stay identical.
add_test(NAME kernel_replay_finds_flipped_bit COMMAND sh -c [=[
  d="$2" && rm -rf "$d" "$d.src" && mkdir -p "$(dirname "$d")" &&
  "$1" kernel --n 1111 --data special --dump "$d.src" > /dev/null && cp -r "$d.src" "$d" &&
  b=$(od -An -tu1 -j149 -N1 "$d/theta.out.bin") &&
  printf "$(printf '\\%03o' $((b ^ 4)))" | dd of="$d/theta.out.bin" bs=1 seek=149 conv=notrunc 2> /dev/null
  "$1" kernel --replay "$d"; echo "exit status $?"
  "$1" kernel --replay "$d" --json; echo "exit status $?"]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_golden_dir}/flipped)
set_tests_properties(kernel_replay_finds_flipped_bit PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "theta +DIFFERS in 1 of 1111 fp32 elements; first at element 37: expected 0x[0-9a-f]+, actual 0x[0-9a-f]+; inputs theta=0x[0-9a-f]+ m=0x[0-9a-f]+ v=0x[0-9a-f]+ grad=0x[0-9a-f]+\nm +identical.*exit status 1.*\"index\": 37,.*\"name\": \"theta\".*exit status 1"
  FAIL_REGULAR_EXPRESSION "(m|v|status) +DIFFERS")

# Refusals of bad golden directories (exit 2), each naming the file, what was expected and what
# was found. Each case dumps a sparse problem (n = 100, nnz = 10, mode 0x000000b0), changes it
# with a shell command ($d is the directory), and replays it. Cases: name|command|expected output.
set(csdkit_golden_refusals
  [=[missing_dir|rm -rf "$d"|/missing_dir': expected a directory written by `csdkit kernel --dump` \(problem.json and its .bin files\), found nothing]=]
  [=[no_problem_json|rm "$d/problem.json"|/no_problem_json/problem.json': expected the problem description, found none]=]
  [=[invalid_json|echo '{' > "$d/problem.json"|/invalid_json/problem.json': expected JSON, found invalid JSON]=]
  [=[huge_json|head -c 2000000 /dev/zero > "$d/problem.json"|/huge_json/problem.json': expected at most 1048576 bytes .*, found 2000000]=]
  [=[deep_json|(head -c 80000 /dev/zero | tr '\0' '[' && head -c 80000 /dev/zero | tr '\0' ']') > "$d/problem.json"|/deep_json/problem.json': expected JSON nested at most 64 levels deep, found deeper nesting]=]
  [=[fifo_json|rm "$d/problem.json" && mkfifo "$d/problem.json"|/fifo_json/problem.json': expected a regular JSON file, found a FIFO]=]
  [=[field_missing|sed -i '/^  "n": /d' "$d/problem.json"|/field_missing/problem.json': expected a field "n", found none]=]
  [=[field_mistyped|sed -i 's/^  "n": 100,/  "n": "100",/' "$d/problem.json"|/field_mistyped/problem.json': "n": expected a whole number in \[1, 4294967295\], found "100" \(string\)]=]
  [=[field_range|sed -i 's/^  "nnz": 10,/  "nnz": -1,/' "$d/problem.json"|/field_range/problem.json': "nnz": expected a whole number in \[0, 4294967295\], found -1 \(a negative number\)]=]
  [=[scalar_hex|sed -i 's/"hex": "0x3f800000"/"hex": "1.0"/' "$d/problem.json"|/scalar_hex/problem.json' args\[[0-9]+\]: "hex": expected a 32-bit pattern as "0x" and 1 to 8 hex digits, found "1.0"]=]
  [=[mode_invalid|sed -i 's/"hex": "0x000000b0"/"hex": "0x000060b0"/' "$d/problem.json"|/mode_invalid/problem.json': "args" 'mode': expected a mode word the kernel accepts .*found 0x000060b0]=]
  [=[mode_disagrees|sed -i 's/^  "grad": "bf16"/  "grad": "fp16"/' "$d/problem.json"|/mode_disagrees/problem.json': "grad": expected "bf16" \(what the mode word 0x000000b0 says]=]
  [=[count_vs_nnz|sed -i -e 's/^  "nnz": 10,/  "nnz": 11,/' -e 's/"hex": "0x0000000a"/"hex": "0x0000000b"/' "$d/problem.json"|/count_vs_nnz/problem.json' inputs\[3\]: "count" of 'grad': expected 11 \(optimizer adamw, grad bf16, out fp16, n = 100, sparse, nnz = 11\), found 10]=]
  [=[count_vs_mode|sed -i -e 's/^  "nnz": 10,/  "nnz": 0,/' -e 's/"hex": "0x0000000a"/"hex": "0x00000000"/' -e 's/"hex": "0x000000b0"/"hex": "0x00000030"/' -e 's/^  "sparse": true/  "sparse": false/' "$d/problem.json"|/count_vs_mode/problem.json' inputs\[3\]: "count" of 'grad': expected 100 \(optimizer adamw, grad bf16, out fp16, n = 100, dense\), found 10]=]
  [=[buffer_missing|rm "$d/v.in.bin"|/buffer_missing/v.in.bin' \(input 'v'\): expected a file of 400 bytes \(100 fp32 elements\), found none]=]
  [=[buffer_short|truncate -s -2 "$d/grad.in.bin"|/buffer_short/grad.in.bin' \(input 'grad'\): expected a file of 20 bytes \(10 bf16 elements\), found 18 bytes \(short\)]=]
  [=[buffer_oversized|echo x >> "$d/out16.out.bin"|/buffer_oversized/out16.out.bin' \(output 'out16'\): expected a file of 200 bytes \(100 fp16 elements\), found 202 bytes \(too long\)]=])
foreach(c IN LISTS csdkit_golden_refusals)
  string(FIND "${c}" "|" a)
  string(FIND "${c}" "|" b REVERSE)
  string(SUBSTRING "${c}" 0 ${a} name)
  math(EXPR a1 "${a} + 1")
  math(EXPR alen "${b} - ${a1}")
  math(EXPR b1 "${b} + 1")
  string(SUBSTRING "${c}" ${a1} ${alen} change)
  string(SUBSTRING "${c}" ${b1} -1 expect)
  add_test(NAME kernel_replay_refuses_${name} COMMAND sh -c [=[
    d="$2" && rm -rf "$d" && mkdir -p "$(dirname "$d")" &&
    "$1" kernel --n 100 --grad bf16 --out fp16 --topk 0.1 --dump "$d" > /dev/null &&
    eval "$3" && "$1" kernel --replay "$d"; echo "exit status $?"]=]
    sh $<TARGET_FILE:csdkit> ${csdkit_golden_dir}/refused/${name} "${change}")
  set_tests_properties(kernel_replay_refuses_${name} PROPERTIES LABELS quick
                       PASS_REGULAR_EXPRESSION "${expect}.*exit status 2")
endforeach()

# The hand-written example of docs/kernel-interface.md ("The directory format"): plain SGD on
# three elements, every file written here byte for byte, replays identical (exit 0).
add_test(NAME kernel_replay_hand_written COMMAND sh -c [=[
  d="$2" && rm -rf "$d" && mkdir -p "$d" && cd "$d" || exit 1
  cat > problem.json << 'JSON'
{
  "format": "csdkit-golden-1", "n": 3, "nnz": 0,
  "args": [
    {"name": "n", "hex": "0x00000003"}, {"name": "nnz", "hex": "0x00000000"},
    {"name": "mode", "hex": "0x00000002"}, {"name": "unscale", "hex": "0x3f800000"},
    {"name": "lr", "hex": "0x3f000000"}, {"name": "beta1", "hex": "0x00000000"},
    {"name": "omb1", "hex": "0x3f800000"}, {"name": "beta2", "hex": "0x3f800000"},
    {"name": "omb2", "hex": "0x3f800000"}, {"name": "eps", "hex": "0x00000000"},
    {"name": "wd", "hex": "0x00000000"}, {"name": "c1", "hex": "0x3f800000"},
    {"name": "c2", "hex": "0x3f800000"}],
  "inputs": [
    {"name": "theta", "file": "theta.in.bin", "dtype": "fp32", "count": 3},
    {"name": "grad", "file": "grad.in.bin", "dtype": "fp32", "count": 3}],
  "outputs": [
    {"name": "theta", "file": "theta.out.bin", "dtype": "fp32", "count": 3},
    {"name": "status", "file": "status.out.bin", "dtype": "u32", "count": 16}]
}
JSON
  printf '\000\000\200\077\000\000\000\100\000\000\200\177' > theta.in.bin
  printf '\000\000\200\077\000\000\000\300\000\000\200\077' > grad.in.bin
  printf '\000\000\000\077\000\000\100\100\000\000\200\177' > theta.out.bin
  # status: error 0, position 0, 3 elements, no sparse entries, CRC-32 of theta as read and as
  # written (lanes 4, 7; no m, no v), 1 non-finite value written (theta'[2] = +inf, lanes 10, 11),
  # lanes 12-14 zero, the magic.
  { printf '\000\000\000\000\000\000\000\000\003\000\000\000\000\000\000\000'
    printf '\302\154\222\317\000\000\000\000\000\000\000\000\257\157\317\046'
    printf '\000\000\000\000\000\000\000\000\001\000\000\000\002\000\000\000'
    printf '\000\000\000\000\000\000\000\000\000\000\000\000\033\000\320\305'; } > status.out.bin
  "$1" kernel --replay "$d"]=]
  sh $<TARGET_FILE:csdkit> ${csdkit_golden_dir}/hand_written)
set_tests_properties(kernel_replay_hand_written PROPERTIES LABELS quick
  PASS_REGULAR_EXPRESSION "theta +identical \\(3 fp32\\)\nstatus +identical \\(16 u32\\)\nreplay: all 2 output buffers identical")

# The independent numpy replay (tests/reference/replay.py, written from the docs): dumped
# launches of every state format — generated problems over the optimizers, gradient dtypes,
# copies, dense and Top-K, IEEE and FTZ, ordinary and special data, and the launches of real
# q8 / q8-bf16 store steps (a seed above 32 bits, a second device's element index) — replay bit
# for bit on every output buffer, the status word included (the script stops at the first
# replay that differs); a flipped bit in a code is found (exit 1).
add_test(NAME state_formats_replay COMMAND sh -c [=[
  c="$1"; r="$2"; d="$3"; rm -rf "$d" && mkdir -p "$d" || exit 1
  i=0
  for st in fp32 q8 q8-bf16; do
    for cfg in "--optimizer adamw --weight-decay 0.1 --grad fp16 --out fp16" \
               "--optimizer adam --weight-decay 0.01 --step 3 --grad bf16 --out bf16 --ftz" \
               "--optimizer sgd --momentum 0.9 --nesterov --step 2 --grad fp32 --out none" \
               "--optimizer sgd --momentum 0 --grad bf16 --out bf16 --topk 0.2" \
               "--optimizer adagrad --initial-accumulator 0.1 --grad fp16 --out none --topk 0.1 --ftz" \
               "--optimizer lion --weight-decay 0.1 --grad bf16 --out bf16"; do
      for data in random special; do
        i=$((i + 1))
        a="$cfg"; [ "$st" = q8-bf16 ] && a=$(echo "$cfg" | sed 's/--out fp16/--out bf16/')
        "$c" kernel --n 4352 --seed $i --state $st --data $data $a --dump "$d/gen-$i" > /dev/null || exit 1
      done
    done
  done
  for st in q8 q8-bf16; do
    "$c" init --dir "$d/store-$st" --params 524288 --devices 2 --subgroup 131072 --state $st --optimizer adamw --grad bf16 --seed 77777777777 > /dev/null &&
    "$c" step --dir "$d/store-$st" --steps 2 --dump-launches "$d/dl-$st" > /dev/null || exit 1
  done
  /usr/bin/python3 "$r" "$d"/gen-* "$d"/dl-*/step-*/* || exit 1
  cp -r "$d/gen-13" "$d/flipped" && /usr/bin/python3 -c "import numpy as np, sys; a = np.fromfile(sys.argv[1], np.uint8); a[5] ^= 4; a.tofile(sys.argv[1])" "$d/flipped/m.out.bin"
  /usr/bin/python3 "$r" "$d/flipped"; echo "flipped: exit status $?"]=]
  sh $<TARGET_FILE:csdkit> ${PROJECT_SOURCE_DIR}/tests/reference/replay.py
  ${CMAKE_CURRENT_BINARY_DIR}/state_formats_replay)
set_tests_properties(state_formats_replay PROPERTIES LABELS quick TIMEOUT 300
  PASS_REGULAR_EXPRESSION "dl-q8-bf16/step-2/device-1-subgroup-1: every output identical.*flipped: m DIFFERS: 1 of 4352 u8 elements differ. first at element 5.*flipped: exit status 1")
