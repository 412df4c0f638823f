#!/usr/bin/env bash
# Runs a benchmark on an earlier revision and on the working tree, one
# after the other in the same session, and prints both, so a change is
# judged by figures measured side by side on the same machine.
#
#   bench/compare.sh <rev> storaged    # cargo bench -p storaged --bench store
#   bench/compare.sh <rev> apid        # cargo bench -p apid --bench http
#
# The earlier revision is checked out in a scratch worktree with its own
# target directory; the benchmark's own knobs (BENCH_RECORDS, ...) apply to
# both runs. Output: bench/out/compare-<bench>-<rev>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/compare.sh <rev> storaged|apid}
which=${2:?usage: bench/compare.sh <rev> storaged|apid}
case "$which" in
  storaged) bench=(cargo bench -p storaged --bench store) ;;
  apid) bench=(cargo bench -p apid --bench http) ;;
  *) echo "unknown benchmark $which (storaged or apid)" >&2; exit 2 ;;
esac
short=$(git rev-parse --short "$rev")
scratch=$(mktemp -d /tmp/meta-core-bench-XXXXXX)
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach "$scratch/tree" "$rev" >/dev/null
mkdir -p bench/out
out=bench/out/compare-$which-$short.txt
run() { # <dir> <label>
  echo "=== $2"
  (cd "$1" && cargo build --release --bins --locked -q && "${bench[@]}" 2>/dev/null)
}
{
  echo "bench/compare.sh $rev $which, $(date -u +%FT%TZ), $(nproc) cores"
  run "$scratch/tree" "before: $short"
  run . "after: working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
} | tee "$out"
echo "written to $out"
