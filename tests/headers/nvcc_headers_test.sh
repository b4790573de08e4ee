#!/usr/bin/env bash
# The header tests' sources compiled as CUDA by nvcc (each klaunch header
# standing alone, then all together), linked and run: the generated launchers
# and the runtime must build inside .cu files too.
#
#   nvcc -x cu -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -c <file>
#
# (-pedantic is left out: nvcc's own intermediate file uses GCC line
# directives, which -pedantic rejects.)
#
# nvcc is looked for as bazel/cuda_configure.bzl does: $CUDA_PATH/bin, PATH,
# /usr/local/cuda/bin. Without one the test prints SKIPPED and passes.
# Header directories: $KL_HEADER_DIRS (space separated) if set, else every
# one of specs/ (Bazel's generated headers, in runfiles), include/ and
# generated/ (a source checkout) that holds a klaunch/ folder.
#
# Run by hand from the workspace root: tests/headers/nvcc_headers_test.sh
set -uo pipefail

xml=${XML_OUTPUT_FILE:-}
cases=()  # "name|status|message" with status pass, fail or skip

write_xml() {
    [ -n "$xml" ] || return 0
    local n=${#cases[@]} failures=0 skipped=0 c name status msg
    {
        for c in "${cases[@]}"; do
            status=${c#*|}; status=${status%%|*}
            [ "$status" = fail ] && failures=$((failures + 1))
            [ "$status" = skip ] && skipped=$((skipped + 1))
        done
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites tests=\"$n\" failures=\"$failures\" skipped=\"$skipped\">"
        echo "<testsuite name=\"NvccHeaders\" tests=\"$n\" failures=\"$failures\" skipped=\"$skipped\">"
        for c in "${cases[@]}"; do
            name=${c%%|*}; status=${c#*|}; status=${status%%|*}; msg=${c#*|*|}
            msg=$(printf '%s' "$msg" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g')
            case $status in
                pass) echo "<testcase classname=\"NvccHeaders\" name=\"$name\"/>" ;;
                skip) echo "<testcase classname=\"NvccHeaders\" name=\"$name\"><skipped message=\"$msg\"/></testcase>" ;;
                *) echo "<testcase classname=\"NvccHeaders\" name=\"$name\"><failure message=\"$msg\"/></testcase>" ;;
            esac
        done
        echo "</testsuite>"
        echo "</testsuites>"
    } >"$xml"
}

find_nvcc() {
    if [ -n "${CUDA_PATH:-}" ] && [ -x "$CUDA_PATH/bin/nvcc" ]; then
        echo "$CUDA_PATH/bin/nvcc"
    elif command -v nvcc >/dev/null 2>&1; then
        command -v nvcc
    elif [ -x /usr/local/cuda/bin/nvcc ]; then
        echo /usr/local/cuda/bin/nvcc
    fi
}

nvcc=$(find_nvcc)
if [ -z "$nvcc" ]; then
    echo "SKIPPED: no nvcc (looked in \$CUDA_PATH/bin, PATH, /usr/local/cuda/bin); the headers were not compiled as CUDA"
    cases+=("CompilesEveryHeaderAsCuda|skip|no nvcc in \$CUDA_PATH/bin, PATH or /usr/local/cuda/bin")
    write_xml
    exit 0
fi

srcdir=tests/headers
if [ ! -f "$srcdir/use_all.c" ]; then
    echo "FAIL: run from the workspace root (no $srcdir/use_all.c in $PWD)" >&2
    exit 1
fi

incs=(-I.)
if [ -n "${KL_HEADER_DIRS:-}" ]; then
    for d in $KL_HEADER_DIRS; do incs+=(-I"$d"); done
else
    for d in specs include generated; do
        [ -d "$d/klaunch" ] && incs+=(-I"$d")
    done
fi
echo "nvcc: $nvcc ($("$nvcc" --version | tail -n 1))"
echo "include: ${incs[*]}"

tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/nvcc_headers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

flags=(-x cu -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror)
status=0
objs=()
for src in use_klaunch use_record_backend use_mla_prefill use_paged_decode use_paged_decode_split use_mla_prefill_grid use_cuda_helpers use_image use_tensor_map use_all impl main; do
    cmd=("$nvcc" "${flags[@]}" "${incs[@]}" -c "$srcdir/$src.c" -o "$tmp/$src.o")
    echo "+ ${cmd[*]}"
    if out=$("${cmd[@]}" 2>&1); then
        cases+=("Compiles_$src|pass|")
        objs+=("$tmp/$src.o")
    else
        printf '%s\n' "$out"
        echo "FAIL: $src.c does not compile as CUDA"
        cases+=("Compiles_$src|fail|$(printf '%s' "$out" | grep -m1 -i error)")
        status=1
    fi
done

if [ $status -eq 0 ]; then
    cmd=("$nvcc" "${objs[@]}" -o "$tmp/headers_test" -ldl)
    echo "+ ${cmd[*]}"
    if out=$("${cmd[@]}" 2>&1) && "$tmp/headers_test"; then
        cases+=("LinksAndRunsEveryHeader|pass|")
    else
        printf '%s\n' "$out"
        echo "FAIL: linking or running the nvcc-built header test"
        cases+=("LinksAndRunsEveryHeader|fail|link or run failed")
        status=1
    fi
fi

write_xml
[ $status -eq 0 ] && echo "PASS: every header compiles as CUDA with nvcc"
exit $status
