#!/bin/sh
# Takes the figures of docs/benchmarks.md ("Issue 16's targets on Pebble"),
# one after the other, on a machine with nothing else running: one node
# (spread and one partition), --scale 100000, three nodes of `shoal dev`
# against three etcd members (forwarded and routed), the move benchmark,
# and the syncs per write (scripts/count-syncs.sh).
#
# Usage: scripts/bench-all.sh OUTDIR   (from the repository's root; needs
# Debian's etcd-server for --compare etcd, and strace for the sync counts)
set -eu
O=$(realpath -m "${1:?usage: scripts/bench-all.sh OUTDIR}")
mkdir -p "$O"
B="$O/shoal"
go build -o "$B" ./cmd/shoal
run() { name=$1; shift; echo "== $name"; "$@" > "$O/$name.txt" 2>&1 || echo "(exit $?)"; tail -12 "$O/$name.txt"; }
run bench-users-1000 "$B" bench --users 1000 --duration 8s
run bench-users-1 "$B" bench --users 1 --duration 8s
run scale "$B" bench --scale 100000 --samples 200
D=$(mktemp -d)
"$B" dev --dir "$D" > "$O/dev.log" 2>&1 &
dev=$!
trap 'kill -INT $dev 2>/dev/null; wait $dev 2>/dev/null; rm -rf "$D"' EXIT
i=0
until grep -q "Shoal dev cluster: .* ready" "$O/dev.log"; do
  i=$((i + 1)); [ $i -lt 120 ] || { echo "shoal dev did not get ready: $O/dev.log"; exit 1; }
  sleep 1
done
run compare "$B" bench --cluster --dir "$D" --compare etcd --users 1000 --duration 5s --rounds 3
run compare-routed "$B" bench --cluster --dir "$D" --compare etcd --routed --users 1000 --duration 5s --rounds 3
run cluster "$B" bench --cluster --dir "$D" --duration 4s
kill -INT $dev; wait $dev || true; trap - EXIT; rm -rf "$D"
run move-100k go test ./internal/testcluster/ -run '^$' -bench APartitionMoves -benchtime 1x -move-docs=100000
run move-30k go test ./internal/testcluster/ -run '^$' -bench APartitionMoves -benchtime 1x -move-docs=30000
scripts/count-syncs.sh "$B" "$O" 1000
scripts/count-syncs.sh "$B" "$O" 1
