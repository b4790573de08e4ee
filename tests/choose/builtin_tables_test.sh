#!/usr/bin/env bash
# builtin_tables_test.sh BUILTIN HEADER TABLE...: the committed header is
# what the tables make, and each table reads back strictly (builtin --check
# loads every one with kl_choice_table_load_file). Counts as one case.
set -uo pipefail
builtin=$1 header=$2
shift 2
if [ $# -lt 2 ]; then
  echo "builtin_tables_test: FAILED: expected the H100 and H200 tables, got $#: $*"
  echo "0 passed, 1 failed"
  exit 1
fi
if "$builtin" --check "$header" "$@"; then
  echo "1 passed, 0 failed"
else
  echo "1 passed, 0 failed" >/dev/null
  echo "0 passed, 1 failed"
  exit 1
fi
