#!/usr/bin/env bash
# bazel run //:generate -- writes the generator's outputs into the source tree
# (generated/klaunch/<family>.h and .cuh, generated/python/klaunch_<family>.py
# and .c, docs/LAUNCHERS.md) and prints the
# fatbins Bazel built for them.
# Arguments (from //:generate): every spec (//specs:all_specs, the
# specs/*.yaml files) and every family's manifest (//kernels:manifests,
# <family>.fatbins.tsv from kl_fatbin: family, variant, path, archs).
#
# Refuses, naming the file and writing nothing, a spec it would otherwise
# skip: a spec whose family has no kl_fatbin, and a *.yaml or *.yml under
# specs/ that is not specs/<family>.yaml.
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
manifests=()
for arg in "$@"; do
  case "$arg" in
    *.yaml) specs+=("specs/$(basename "$arg")") ;;
    *.fatbins.tsv) manifests+=("$arg") ;;
    *) echo "generate: unexpected argument $arg" >&2; exit 2 ;;
  esac
done

errors=0
for spec in "${specs[@]}"; do
  family=$(basename "$spec" .yaml)
  have=no
  for manifest in "${manifests[@]}"; do
    [ "$(basename "$manifest" .fatbins.tsv)" = "$family" ] && have=yes
  done
  if [ "$have" = no ]; then
    echo "$spec: error: no kernels are built for family $family; add \"$family\": [<its variants>] to kl_fatbins in kernels/BUILD" >&2
    errors=$((errors + 1))
  fi
done
while IFS= read -r -d '' path; do
  rel=${path#"$BUILD_WORKSPACE_DIRECTORY"/}
  known=no
  for spec in "${specs[@]}"; do [ "$spec" = "$rel" ] && known=yes; done
  if [ "$known" = no ]; then
    echo "$rel: error: not read by //:generate, which reads specs/<family>.yaml; move it to specs/<family>.yaml (one family per file) or out of specs/" >&2
    errors=$((errors + 1))
  fi
done < <(find "$BUILD_WORKSPACE_DIRECTORY/specs" \( -name '*.yaml' -o -name '*.yml' \) -print0 | sort -z)
if [ "$errors" -gt 0 ]; then
  echo "generate: $errors error(s); nothing written" >&2
  exit 1
fi

(cd "$BUILD_WORKSPACE_DIRECTORY" &&
  python3 codegen/main.py --include-dir generated --python-dir generated/python --docs docs/LAUNCHERS.md "${specs[@]}")

# The table: one row per fatbin.
{
  printf 'family\tvariant\tfatbin (in bazel-bin/)\tbytes\ttargets\theaders\n'
  for manifest in "${manifests[@]}"; do
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
  for manifest in "${manifests[@]}"; do
    family=$(basename "$manifest" .fatbins.tsv)
    sed -n 's|^/\* ==== kl_\([A-Za-z0-9_]*\) =*.*|\1|p; s|^ \* Kernel entry \([A-Za-z0-9_]*\); \(.*\)\.$|\1\t\2|p' \
      "$BUILD_WORKSPACE_DIRECTORY/generated/klaunch/$family.h" | paste - - | sed "s|^|$family\t|"
  done
} | awk -F'\t' '
  { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } n = NF }
  END { for (r = 1; r <= NR; r++) { line = ""
          for (i = 1; i <= n; i++) line = line sprintf(i < n ? "%-" w[i] "s  " : "%s", cell[r, i])
          print line } }'
echo "wrote generated/klaunch/, generated/python/ and docs/LAUNCHERS.md in $BUILD_WORKSPACE_DIRECTORY"
