#!/usr/bin/env bash
# Binary size and dependency count of a small program linking each engine
# (see size/*/main.go), built as Shoal is: pure Go (CGO_ENABLED=0),
# -trimpath, default symbols. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| program | binary | stripped (-s -w) | packages (go list -deps) | non-standard packages | modules |"
echo "|---|---|---|---|---|---|"
for p in none sqlite pebble mongo-sqlite mongo-pebble ferretdb ferretdb-pebble; do
  pkg=./size/$p
  CGO_ENABLED=0 go build -trimpath -o "$out/$p" "$pkg"
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$p.s" "$pkg"
  "$out/$p" # it runs: the linked engine opens, writes and closes
  deps=$(CGO_ENABLED=0 go list -deps "$pkg" | wc -l)
  nonstd=$(CGO_ENABLED=0 go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$pkg" | grep -c . || true)
  mods=$(CGO_ENABLED=0 go list -deps -f '{{with .Module}}{{.Path}}{{end}}' "$pkg" | sort -u | grep -vc "^github.com/shoal-db/shoal" || true)
  mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
  echo "| $p | $(mib "$out/$p") | $(mib "$out/$p.s") | $deps | $nonstd | $mods |"
done
