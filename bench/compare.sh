#!/usr/bin/env bash
# Runs a benchmark on an earlier revision and on the working tree, one
# after the other in the same session, and prints both, so a change is
# judged by figures measured side by side on the same machine.
#
#   bench/compare.sh <rev> store     # cargo bench -p bench --bench store
#   bench/compare.sh <rev> search    # cargo bench -p bench --bench search
#   bench/compare.sh <rev> http      # cargo bench -p bench --bench http
#   bench/compare.sh <rev> sse       # cargo bench -p bench --bench sse
#   bench/compare.sh <rev> watch     # cargo bench -p watcherd --bench watch
#   bench/compare.sh <rev> store http sse watch   # several, both trees built once
#
# (`storaged` and `apid` are the old names of store and http.) A revision
# from before the bench package ran these from storaged and apid: the
# command follows the tree it runs in.
#
# The earlier revision is checked out in a scratch worktree with its own
# target directory; both trees are built first, then each benchmark runs
# on the one and at once on the other. The benchmarks' own knobs
# (BENCH_RECORDS, ...) apply to both runs.
# Output: bench/out/compare-<benches>-<rev>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/compare.sh <rev> store|search|http|sse|watch ..."
rev=${1:?$usage}
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
benches=()
for which in "$@"; do
  case "$which" in
    storaged) which=store ;;
    apid) which=http ;;
  esac
  case "$which" in
    store|search|http|sse|watch) benches+=("$which") ;;
    *) echo "unknown benchmark $which; $usage" >&2; exit 2 ;;
  esac
done
# The package that holds benchmark $2 in the tree at $1: bench/ where the
# tree has it, else the daemon's crate it lived in before.
package() {
  case "$2" in
    watch) echo watcherd ;;
    store|search) [ -f "$1/bench/Cargo.toml" ] && echo bench || echo storaged ;;
    http|sse) [ -f "$1/bench/Cargo.toml" ] && echo bench || echo apid ;;
  esac
}
short=$(git rev-parse --short "$rev")
scratch=$(mktemp -d /tmp/meta-core-bench-XXXXXX)
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach "$scratch/tree" "$rev" >/dev/null
mkdir -p bench/out
names=$(IFS=-; echo "${benches[*]}")
out=bench/out/compare-$names-$short.txt
build() { # <dir>
  (cd "$1" && cargo build --release --bins --locked -q)
}
run() { # <dir> <label> <bench>
  echo "=== $3, $2"
  local p
  p=$(package "$1" "$3")
  (cd "$1" && cargo bench -q -p "$p" --bench "$3" 2>/dev/null)
}
here="working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
{
  echo "bench/compare.sh $rev ${benches[*]}, $(date -u +%FT%TZ), $(nproc) cores"
  build "$scratch/tree"
  build .
  for b in "${benches[@]}"; do
    run "$scratch/tree" "before: $short" "$b"
    run . "after: $here" "$b"
  done
} | tee "$out"
echo "written to $out"
