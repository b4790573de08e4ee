#!/usr/bin/env bash
# bazel run //:generate -- writes the generator's outputs into the source tree
# (generated/klaunch/<family>.h and .cuh, docs/LAUNCHERS.md) and prints the
# fatbins Bazel built for them.
# Arguments (from //:generate): one manifest per family (<family>.fatbins.tsv
# from kl_fatbin: family, variant, path, archs).
#
# The generator runs from its source in the workspace (codegen/main.py, the
# program of //codegen:generator) with the python3 on PATH: the same
# code the build's genrules ran, without depending on a runfiles tree.
set -euo pipefail

if [ -z "${BUILD_WORKSPACE_DIRECTORY:-}" ]; then
  echo "generate: run it as: bazel run //:generate" >&2
  exit 2
fi

specs=()
for manifest in "$@"; do
  family=$(basename "$manifest" .fatbins.tsv)
  specs+=("specs/$family.yaml")
done

(cd "$BUILD_WORKSPACE_DIRECTORY" &&
  python3 codegen/main.py --include-dir generated --docs docs/LAUNCHERS.md "${specs[@]}")

# The table: one row per fatbin.
{
  printf 'family\tvariant\tfatbin (in bazel-bin/)\tbytes\ttargets\theaders\n'
  for manifest in "$@"; do
    while IFS=$'\t' read -r family variant path archs; do
      [ -n "$family" ] || continue
      bytes=$(stat -L -c %s "$path")
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$family" "$variant" "$path" "$bytes" "$archs" \
        "generated/klaunch/$family.h generated/klaunch/$family.cuh"
    done <"$manifest"
  done
} | awk -F'\t' '
  { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NF }
  END { for (r = 1; r <= NR; r++) { line = ""
          for (i = 1; i <= n; i++) line = line sprintf(i < n ? "%-" w[i] "s  " : "%s", cell[r, i])
          print line } }'
# The kernels: one row per launcher, from the headers just written (each
# launcher's comment names its kernel entry and spec line).
echo
{
  printf 'family\tlauncher\tkernel entry\tspec\n'
  for manifest in "$@"; do
    family=$(basename "$manifest" .fatbins.tsv)
    sed -n 's|^/\* ==== kl_\([A-Za-z0-9_]*\) =*.*|\1|p; s|^ \* Kernel entry \([A-Za-z0-9_]*\); \(.*\)\.$|\1\t\2|p' \
      "$BUILD_WORKSPACE_DIRECTORY/generated/klaunch/$family.h" | paste - - | sed "s|^|$family\t|"
  done
} | awk -F'\t' '
  { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NF }
  END { for (r = 1; r <= NR; r++) { line = ""
          for (i = 1; i <= n; i++) line = line sprintf(i < n ? "%-" w[i] "s  " : "%s", cell[r, i])
          print line } }'
echo "wrote generated/klaunch/ and docs/LAUNCHERS.md in $BUILD_WORKSPACE_DIRECTORY"
