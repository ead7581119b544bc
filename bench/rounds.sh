#!/bin/bash
# rounds.sh: three rounds of issue #17's benchmarks, each running every line back to back, so
# every figure has its baselines from the same minutes:
#   SQLite burndown 20,000 (this build, a baseline build, River-on-SQLite tuned),
#   PostgreSQL pickup paced at 200/s (the same three, River from ../shared/bench/anchors/river),
#   fanout and chain on PostgreSQL and on SQLite (this build),
#   PostgreSQL burndown 20,000 (this build, the baseline build, River tuned).
# Set NEW and BASE to two sluice-bench binaries (go build -o … ./cmd/sluice-bench; a baseline
# built before cmd/sluice-bench existed is its sluice binary followed by the word bench, as in
# BASE="/tmp/sluice-old bench"), RIVER_SQLITE and RIVER_PG to the harnesses built from
# ../shared/bench/anchors-sqlite and ../shared/bench/anchors (go build -o … ./river), SPG and RPG to
# two databases of their own (createdb sluicebench; createdb riverbench).
NEW=${NEW:?a sluice-bench binary}; BASE=${BASE:?a baseline sluice-bench binary}
RIVER_SQLITE=${RIVER_SQLITE:?River-on-SQLite harness}; RIVER_PG=${RIVER_PG:?River harness}
SPG=${SPG:-"postgres://postgres@127.0.0.1:5432/sluicebench?sslmode=disable"}
RPG=${RPG:-"postgres://postgres@127.0.0.1:5432/riverbench?sslmode=disable"}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
j() { python3 -c "import sys,json; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(' '.join(f'{k}={d[k]}' for k in sys.argv[1:] if k in d))" "$@"; }
ld() { cut -d' ' -f1-3 /proc/loadavg; }
for r in 1 2 3; do
  echo "== round $r $(date -u +%H:%M:%S) load $(ld)"
  # SQLite burndown 20k: new, base, River-on-SQLite tuned
  for b in NEW BASE; do d=$(mktemp -d $W/s.XXXX); (cd $d && ${!b} engine --tasks 20000 2>/dev/null | j tasks_per_sec cpu_us_per_task | sed "s/^/sqlite20k $b /"); rm -rf $d; done
  d=$(mktemp -d $W/r.XXXX); (cd $d && $RIVER_SQLITE -n 20000 -mode burndown -workers 2000 -tuned 2>&1 | grep '^work' | sed 's/^/sqlite20k RIVER /'); rm -rf $d
  echo "   load $(ld)"
  # PG pickup at 200/s: new, base, River tuned
  for b in NEW BASE; do d=$(mktemp -d $W/p.XXXX); (cd $d && ${!b} engine --tasks 2000 --mode paced --rate 200 --database "$SPG" 2>/dev/null | j pickup_p50_ms pickup_p99_ms tasks_per_sec cpu_us_per_task | sed "s/^/pickup $b /"); rm -rf $d; done
  $RIVER_PG -dsn "$RPG" -n 2000 -mode stream -rate 200 -workers 2000 -tuned 2>&1 | grep -E '^(latency|insert|e2e)' | tr '\n' ' ' | sed 's/^/pickup RIVER /'; echo
  echo "   load $(ld)"
  # fanout and chain, PG and SQLite, new build
  for m in "fanout --items 10000" "chain --items 2000 --steps 10"; do
    for db in PG SQLITE; do
      d=$(mktemp -d $W/f.XXXX); a=""; [ $db = PG ] && a="--database $SPG"
      (cd $d && $NEW engine --mode $m $a 2>/dev/null | j tasks_per_sec cpu_us_per_task db_cpu_us_per_task | sed "s/^/${m%% *} $db /"); rm -rf $d
    done
  done
  echo "   load $(ld)"
  # PG burndown 20k: new, base, River tuned
  for b in NEW BASE; do d=$(mktemp -d $W/b.XXXX); (cd $d && ${!b} engine --tasks 20000 --database "$SPG" 2>/dev/null | j tasks_per_sec cpu_us_per_task db_cpu_us_per_task | sed "s/^/pg20k $b /"); rm -rf $d; done
  $RIVER_PG -dsn "$RPG" -n 20000 -mode burndown -workers 2000 -tuned 2>&1 | grep '^work' | sed 's/^/pg20k RIVER /'
done
echo "== end $(date -u +%H:%M:%S) load $(ld)"
