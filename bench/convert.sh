#!/bin/bash
# convert.sh: issue #40's conversion benchmarks in one command. It runs, one after the other and
# with the same ROUNDS,
#   bench/office.sh   office documents: sluice ingest against a soffice batch and unoconv,
#   bench/ocr.sh      scanned PDFs: sluice ingest --ocr against OCRmyPDF and pdftoppm + tesseract,
#   bench/html.sh     HTML: sluice ingest against chromium --print-to-pdf (when the script exists),
#   sluice-bench ingest --files 2000 --size 1024, ROUNDS times: the engine's overhead over the
#                     same conversions done directly,
# keeps each one's full output in OUT (default: a new temporary directory, printed) and ends with
# one table: each comparison's same-round ratios (lowest–highest over the rounds; below 1 means
# Sluice took less), the word error rates, and the engine's overhead. Every script prints the load
# average with each round: the machine may be shared, and a ratio is only as good as its round.
#
# Usage: SLUICE=/path/to/sluice SLUICE_BENCH=/path/to/sluice-bench bench/convert.sh [ROUNDS]   (default 3)
# SUMMARY_ONLY=1 OUT=DIR: print the table of an earlier run's logs in DIR, running nothing.
# Each script's own needs apply (see its head); UNOCONV, CORPUS and the others pass through.
set -uo pipefail
if [ -z "${SUMMARY_ONLY:-}" ]; then
  SLUICE=${SLUICE:?a sluice binary (go build -o /tmp/sluice ./cmd/sluice)}
  SLUICE_BENCH=${SLUICE_BENCH:?a sluice-bench binary (go build -o /tmp/sluice-bench ./cmd/sluice-bench)}
  export SLUICE
fi
ROUNDS=${1:-3}
DIR=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "== convert.sh: $ROUNDS rounds, outputs in $OUT; start $(date -u '+%Y-%m-%d %H:%M:%S') UTC load $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"

# run NAME CMD...: runs CMD with its output shown and kept in OUT/NAME.log; a failure is
# reported and the others still run.
run() {
  local name=$1; shift
  echo "== $name"
  "$@" 2>&1 | tee "$OUT/$name.log"
  [ "${PIPESTATUS[0]}" = 0 ] || echo "== $name failed (exit ${PIPESTATUS[0]}); its rows below are what it printed"
}
ingest() {
  for r in $(seq "$ROUNDS"); do
    echo "== round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$SLUICE_BENCH" ingest --files 2000 --size 1024 || return 1
  done
}
if [ -z "${SUMMARY_ONLY:-}" ]; then
  run office "$DIR/office.sh" "$ROUNDS"
  run ocr "$DIR/ocr.sh" "$ROUNDS"
  if [ -f "$DIR/html.sh" ]; then
    run html bash "$DIR/html.sh" "$ROUNDS"
  else
    echo "== html: no bench/html.sh, skipped"
  fi
  run ingest ingest
fi

# The table. Each script prints one "ratios" row per round: "ratios A/B wall X cpu Y; A/C wall X
# cpu Y"; ocr.sh a "word error rate W" on each tool's row; sluice-bench one JSON object per round.
echo
echo "== summary ($ROUNDS rounds; end $(date -u +%H:%M:%S) UTC load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| benchmark | Sluice against | wall ratio | CPU ratio | rounds |"
echo "|---|---|---|---|---|"
for name in office ocr html; do
  [ -f "$OUT/$name.log" ] || continue
  awk -v bench="$name" '
    /^ *ratios/ {
      sub(/^ *ratios */, "")
      n = split($0, parts, ";")
      for (i = 1; i <= n; i++) {
        split(parts[i], f, " ")  # sluice/PEER wall X cpu Y
        k = f[1]
        if (!(k in rounds)) { order[++m] = k; wmin[k] = wmax[k] = f[3]; cmin[k] = cmax[k] = f[5] }
        rounds[k]++
        if (f[3] + 0 < wmin[k] + 0) wmin[k] = f[3]; if (f[3] + 0 > wmax[k] + 0) wmax[k] = f[3]
        if (f[5] + 0 < cmin[k] + 0) cmin[k] = f[5]; if (f[5] + 0 > cmax[k] + 0) cmax[k] = f[5]
      }
    }
    function span(a, b) { return (a == b) ? sprintf("%.2f", a) : sprintf("%.2f–%.2f", a, b) }
    END {
      for (j = 1; j <= m; j++) {
        k = order[j]; peer = k; sub(/^[^\/]*\//, "", peer)
        printf "| %s | %s | %s | %s | %d |\n", bench, peer, span(wmin[k], wmax[k]), span(cmin[k], cmax[k]), rounds[k]
      }
    }' "$OUT/$name.log"
done
if [ -f "$OUT/ocr.log" ]; then
  echo
  echo "| OCR text | word error rate | bag-of-words error rate | testOCR.pdf's phrase |"
  echo "|---|---|---|---|"
  awk '/word error rate/ {
      tool = $1
      for (i = 1; i < NF; i++) { if ($i == "rate" && $(i - 1) == "error") w = $(i + 1); if ($i == "bag-of-words") b = $(i + 1) }
      if (!(tool in wlo)) { order[++m] = tool; wlo[tool] = whi[tool] = w; blo[tool] = bhi[tool] = b }
      if (w + 0 < wlo[tool] + 0) wlo[tool] = w; if (w + 0 > whi[tool] + 0) whi[tool] = w
      if (b + 0 < blo[tool] + 0) blo[tool] = b; if (b + 0 > bhi[tool] + 0) bhi[tool] = b
      rounds[tool]++
      if ($NF == "found") found[tool]++
    }
    function span(a, b) { return (a == b) ? a : a "–" b }
    END {
      for (j = 1; j <= m; j++) {
        t = order[j]
        printf "| %s | %s | %s | found in %d of %d rounds |\n", t, span(wlo[t], whi[t]), span(blo[t], bhi[t]), found[t], rounds[t]
      }
    }' "$OUT/ocr.log"
fi
if [ -f "$OUT/ingest.log" ]; then
  echo
  echo "| engine overhead over direct conversions (sluice-bench ingest, 2,000 × 1 KB) | wall | CPU | rounds |"
  echo "|---|---|---|---|"
  /usr/bin/python3 - "$OUT/ingest.log" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def span(key):
    v = sorted(r[key] for r in rows if key in r)
    if not v:
        return "–"
    return "%.1f %%" % v[0] if len(v) == 1 else "%.1f to %.1f %%" % (v[0], v[-1])
if rows:
    print("| to the job's end (job_overhead_pct, job_cpu_overhead_pct) | %s | %s | %d |" % (span("job_overhead_pct"), span("job_cpu_overhead_pct"), len(rows)))
    print("| to the command's return (engine_overhead_pct, cpu_overhead_pct) | %s | %s | %d |" % (span("engine_overhead_pct"), span("cpu_overhead_pct"), len(rows)))
EOF
fi
