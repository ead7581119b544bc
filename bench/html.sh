#!/bin/bash
# html.sh: issue #40's HTML benchmark in one command. The same ~40 HTML documents (the corpus's
# HTML files, copied under distinct names and as distinct bytes), rendered to PDF three ways in
# each round, back to back, so that every ratio compares figures of the same minutes:
#   before   `sluice ingest` of the documents with BEFORE, a build to compare with (a cold
#            Chromium per document),
#   after    `sluice ingest` with SLUICE (warm Chromium); both also take each document's text
#            and make a thumbnail, which the peer does not,
#   chromium `chromium --headless --print-to-pdf` once per document, as a script would.
# Each figure is the whole command's wall and CPU (user+sys of it and its children, GNU time),
# and the ratios are after/before, after/chromium and before/chromium per round. The load
# average is printed with each round: the machine may be shared.
#
# Usage: SLUICE=/path/to/sluice [BEFORE=/path/to/other/sluice] bench/html.sh [ROUNDS] [COPIES]
# (defaults 3 and 20). Without BEFORE, only sluice and chromium run (bench/convert.sh's way). Needs chromium, GNU time (/usr/bin/time) and the corpus at
# ../shared/corpus/files (CORPUS= to change).
set -euo pipefail
SLUICE=${SLUICE:?a sluice binary (go build -o /tmp/sluice ./cmd/sluice)}
BEFORE=${BEFORE:-}
ROUNDS=${1:-3}
COPIES=${2:-20}
CORPUS=${CORPUS:-$(cd "$(dirname "$0")/../../shared/corpus/files" && pwd)}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# Copy I of a document is other bytes with the same rendering, as distinct documents would be:
# Sluice renders a document once per content (its conversion cache), so copies of the same
# bytes would be rendered once by Sluice and COPIES times by the peer. Each copy gets a comment
# at its end, in the document's own encoding (UTF-16 for a document with that byte-order mark).
mkdir -p "$W/docs"
for f in "$CORPUS"/*.html; do
  /usr/bin/python3 - "$f" "$W/docs" "$COPIES" <<'PY'
import os, sys
src, out, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = open(src, "rb").read()
enc = "utf-16-le" if raw.startswith(b"\xff\xfe") else "utf-16-be" if raw.startswith(b"\xfe\xff") else None
base = os.path.basename(src)[:-len(".html")]
for i in range(1, copies + 1):
    tail = "\n<!-- copy %d -->\n" % i
    data = raw + (tail.encode(enc) if enc else tail.encode())
    open(os.path.join(out, "%d-%s.html" % (i, base)), "wb").write(data)
PY
done
if [ "$(sha256sum "$W"/docs/* | cut -d' ' -f1 | sort -u | wc -l)" != "$(ls "$W/docs" | wc -l)" ]; then
  echo "the copies are not distinct" >&2
  exit 1
fi
N=$(ls "$W/docs" | wc -l)
echo "== $N HTML documents ($COPIES copies of the corpus's), $ROUNDS rounds; $(nproc) CPUs"
# timed NAME CMD...: runs CMD, prints "NAME wall cpu" (seconds).
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$W/time" "$@" >"$W/$name.log" 2>&1 || { echo "$name failed:"; tail -5 "$W/$name.log"; }
  read -r wall user sys <"$W/time"
  echo "$name $wall $(echo "$user + $sys" | bc)"
}
ratio() { echo "scale=2; $1 / $2" | bc; }
summary() { grep -o 'complete in [^:]*: [0-9]* documents, [0-9]* errors' "$W/$1.log" || echo "no summary"; }
for r in $(seq "$ROUNDS"); do
  echo "== round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$W/before-data" "$W/after-data" "$W/peer"
  mkdir -p "$W/peer"
  if [ -n "$BEFORE" ]; then
    read -r _ bw bc < <(timed before "$BEFORE" ingest --data "$W/before-data" "$W"/docs/*)
  fi
  read -r _ aw ac < <(timed after "$SLUICE" ingest --data "$W/after-data" "$W"/docs/*)
  read -r _ pw pc < <(timed chromium sh -c 'for f in "$0"/docs/*; do
      b=$(basename "$f" .html)
      chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --print-to-pdf="$0/peer/$b.pdf" "$f" 2>/dev/null || exit 1
    done' "$W")
  pdfs=$(ls "$W/peer" | wc -l)
  if [ -z "$BEFORE" ]; then
    echo "   sluice   wall ${aw}s cpu ${ac}s ($(summary after))"
    echo "   chromium wall ${pw}s cpu ${pc}s ($pdfs pdfs)"
    echo "   ratios   sluice/chromium wall $(ratio "$aw" "$pw") cpu $(ratio "$ac" "$pc")"
    continue
  fi
  echo "   before   wall ${bw}s cpu ${bc}s ($(summary before))"
  echo "   after    wall ${aw}s cpu ${ac}s ($(summary after))"
  echo "   chromium wall ${pw}s cpu ${pc}s ($pdfs pdfs)"
  echo "   ratios   after/before wall $(ratio "$aw" "$bw") cpu $(ratio "$ac" "$bc");" \
    "after/chromium wall $(ratio "$aw" "$pw") cpu $(ratio "$ac" "$pc");" \
    "before/chromium wall $(ratio "$bw" "$pw") cpu $(ratio "$bc" "$pc")"
done
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
