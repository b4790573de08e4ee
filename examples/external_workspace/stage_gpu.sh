#!/usr/bin/env bash
# examples/external_workspace/stage_gpu.sh -- after klaunch's
# tools/gpu/stage.sh, adds this workspace's GPU tests to klaunch's .gpu/ so
# that `bash .gpu/run.sh` on the GPU machine runs them with the rest.
#
# Builds every cc_test tagged gpu here, statically (GoogleTest linked in, the
# fatbins embedded: each binary is one file), copies it to
# .gpu/examples/external_workspace/<package>/<name> and appends it to
# .gpu/targets.tsv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
stage=../../.gpu
if [ ! -f "$stage/targets.tsv" ]; then
  echo "stage_gpu.sh: no $stage/targets.tsv; run klaunch's tools/gpu/stage.sh first" >&2
  exit 1
fi
mapfile -t targets < <(../../bazelw query --output=label "attr(tags, '[\[ ]gpu[,\]]', kind('cc_test rule', //...))" 2>/dev/null)
if [ ${#targets[@]} -eq 0 ]; then
  echo "stage_gpu.sh: no cc_test tagged gpu in this workspace" >&2
  exit 1
fi
../../bazelw build --dynamic_mode=off "$@" "${targets[@]}"
for label in "${targets[@]}"; do
  pkg=${label#//}
  pkg=${pkg%%:*}
  name=${label##*:}
  path=examples/external_workspace/$pkg/$name
  mkdir -p "$stage/$(dirname "$path")"
  cp -L "bazel-bin/$pkg/$name" "$stage/$path"
  # Once, however often this runs.
  grep -q "^@klaunch_example$label	" "$stage/targets.tsv" ||
    printf '%s\t%s\t%s\n' "@klaunch_example$label" "$path" test >>"$stage/targets.tsv"
  echo "staged @klaunch_example$label as .gpu/$path"
done
