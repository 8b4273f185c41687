#!/bin/sh
# Counts a node's fsync and fdatasync calls (strace) while `shoal bench
# --url` drives it for 5 s of writes and 5 s of reads as USERS users, to
# see how many writes share a sync.
#
# Usage: scripts/count-syncs.sh SHOAL_BINARY OUTDIR USERS
set -eu
B=$(realpath "$1"); O=$(realpath -m "$2"); U=$3
mkdir -p "$O"
D=$(mktemp -d)
secret=count-syncs-secret-0123456789
strace -f --seccomp-bpf -c -e trace=fdatasync,fsync -o "$O/strace-$U.txt" \
  "$B" serve --node-id syncs --http-addr 127.0.0.1:18555 --gossip-addr 127.0.0.1:18556 \
  --data-dir "$D/data" --auth-secret "$secret" > "$O/serve-$U.log" 2>&1 &
tracer=$!
i=0
until curl -sf http://127.0.0.1:18555/readyz > /dev/null; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "the node did not get ready: $O/serve-$U.log"; exit 1; }
  sleep 0.2
done
token=$(AUTH_SECRET=$secret "$B" token --admin --user count-syncs)
"$B" bench --url http://127.0.0.1:18555 --token "$token" --users "$U" --duration 5s > "$O/bench-url-$U.txt" 2>&1
# strace ignores SIGTERM while it traces: stop the node, and strace ends with it.
pkill -TERM -f "serve --node-id syncs --http-addr 127.0.0.1:18555"
wait $tracer || true
rm -rf "$D"
echo "== syncs, --users $U"
grep -E "REST writes" "$O/bench-url-$U.txt"
cat "$O/strace-$U.txt"
