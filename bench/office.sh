#!/bin/bash
# office.sh: issue #40's office benchmark in one command. The same ~40 office documents (the
# corpus's office files, copied N times under distinct names and as distinct bytes), converted to PDF three ways in
# each round, back to back, so that every ratio compares figures of the same minutes:
#   sluice   `sluice ingest` of the documents (warm converters; it also extracts each PDF's
#            text and makes a thumbnail, which the peers do not),
#   batch    one `soffice --headless --convert-to pdf --outdir` process for all of them,
#   unoconv  `unoconv` against a warm listener (`unoconv --listener`, started before the round
#            and not timed), one call per document, as a conversion service would make; its CPU
#            is the calls' plus what the listener's LibreOffice used during them.
# Each figure is the whole command's wall and CPU (user+sys of it and its children, GNU time),
# and the ratios are sluice/batch and sluice/unoconv per round. The load average is printed
# with each round: the machine may be shared.
#
# Usage: SLUICE=/path/to/sluice bench/office.sh [ROUNDS] [COPIES]   (defaults 3 and 4)
# Needs soffice, unoconv, GNU time (/usr/bin/time) and the corpus at ../shared/corpus/files
# (CORPUS= to change). unoconv: `apt-get install python3-uno`, then the unoconv script; Debian's
# unoconv package would replace libreoffice-core-nogui with libreoffice-core, so take the script
# from it instead (`apt-get download unoconv && dpkg-deb -x unoconv_*.deb DIR`) and name it with
# UNOCONV="/usr/bin/python3 DIR/usr/bin/unoconv"; UNOCONV=skip leaves unoconv out (it takes
# 1.4 s a document: minutes for a few hundred). SLUICE_BASE, when set, is a second sluice binary
# timed the same way right after SLUICE (a build before a change).
set -euo pipefail
SLUICE=${SLUICE:?a sluice binary (go build -o /tmp/sluice ./cmd/sluice)}
ROUNDS=${1:-3}
COPIES=${2:-4}
CORPUS=${CORPUS:-$(cd "$(dirname "$0")/../../shared/corpus/files" && pwd)}
W=$(mktemp -d)
# unoconv needs the python3 that has LibreOffice's uno module (Debian's), not another in PATH.
UNOCONV=${UNOCONV:-"/usr/bin/python3 /usr/bin/unoconv"}
# A port of its own for the listener: other listeners may run on the machine.
PORT=$((20000 + RANDOM % 20000))
LISTENER=""
cleanup() {
  [ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
# distinct FILE I: makes copy I of a document other bytes with the same content, as distinct
# documents would be: Sluice converts a document once per content (its conversion cache), so
# copies of the same bytes would be converted once by Sluice and COPIES times by the peers.
# Zip formats get a zip comment, RTF trailing blank lines, OLE files (.doc, .xls, .ppt) I unused
# 512-byte sectors at their end.
distinct() {
  [ "$2" = 1 ] && return
  case "$1" in
    *.docx | *.odt | *.xlsx | *.ods | *.pptx | *.odp)
      /usr/bin/python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "a") as z: z.comment = b"copy " + sys.argv[2].encode()' "$1" "$2" ;;
    *.rtf) for _ in $(seq "$2"); do echo >>"$1"; done ;;
    *) head -c $((512 * $2)) /dev/zero >>"$1" ;;
  esac
}
mkdir -p "$W/docs"
for i in $(seq "$COPIES"); do
  for f in "$CORPUS"/*.{docx,doc,odt,rtf,xlsx,xls,ods,pptx,ppt,odp}; do
    case "$f" in *protected*) continue ;; esac
    b=$(basename "$f")
    # The extension in the name too: testEXCEL.xls and .xlsx must not write one testEXCEL.pdf.
    d="$W/docs/$i-${b%.*}-${b##*.}.${b##*.}"
    cp "$f" "$d"
    distinct "$d" "$i"
  done
done
if [ "$(sha256sum "$W"/docs/* | cut -d' ' -f1 | sort -u | wc -l)" != "$(ls "$W/docs" | wc -l)" ]; then
  echo "the copies are not distinct" >&2
  exit 1
fi
N=$(ls "$W/docs" | wc -l)
# The document that warms LibreOffice's profile and unoconv's listener (not timed).
# (An array, not `ls | head -1`: with a few hundred files ls dies of SIGPIPE, and pipefail ends the
# script.)
first=("$W"/docs/*.odt "$W"/docs/*)
FIRST=${first[0]}
echo "== $N office documents ($COPIES copies of the corpus's), $ROUNDS rounds; $(nproc) CPUs"
# timed NAME CMD...: runs CMD, prints "NAME wall cpu" (seconds).
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$W/time" "$@" >"$W/$name.log" 2>&1 || { echo "$name failed:"; tail -5 "$W/$name.log"; }
  read -r wall user sys <"$W/time"
  echo "$name $wall $(echo "$user + $sys" | bc)"
}
# listener_cpu: the CPU seconds (user+sys) the listener's soffice.bin has used so far.
listener_cpu() {
  local tick total=0 pid
  tick=$(getconf CLK_TCK)
  for pid in $(pgrep -f "soffice.bin.*port=$PORT"); do
    total=$(awk -v t="$total" -v hz="$tick" '{sub(/^.*\) /, ""); print t + ($12 + $13) / hz}' "/proc/$pid/stat")
  done
  echo "$total"
}
ratio() { echo "scale=2; $1 / $2" | bc; }
# unoconv's listener uses LibreOffice's default profile. Where LibreOffice never ran, its first
# start makes that profile and restarts itself, which ends the listener (unoconv then says
# "Existing LibreOffice listener found" and exits): one conversion with the default profile,
# untimed, makes it first.
soffice --headless --norestore --convert-to pdf --outdir "$W/profile-made" "$FIRST" >/dev/null 2>&1 || true
rm -rf "$W/profile-made"
for r in $(seq "$ROUNDS"); do
  echo "== round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$W/data" "$W/batch" "$W/uno" "$W/profile"
  read -r _ sw sc < <(timed sluice "$SLUICE" ingest --data "$W/data" "$W"/docs/*)
  if [ -n "${SLUICE_BASE:-}" ]; then
    rm -rf "$W/data"
    read -r _ xw xc < <(timed sluice-base "$SLUICE_BASE" ingest --data "$W/data" "$W"/docs/*)
    docs=$(grep -o 'complete in [^:]*: [0-9]* documents, [0-9]* errors' "$W/sluice-base.log" || echo "no summary")
    echo "   base    wall ${xw}s cpu ${xc}s ($docs); sluice/base wall $(ratio "$sw" "$xw") cpu $(ratio "$sc" "$xc")"
  fi
  read -r _ bw bc < <(timed batch soffice --headless --norestore "-env:UserInstallation=file://$W/profile" \
    --convert-to pdf --outdir "$W/batch" "$W"/docs/*)
  if [ "$UNOCONV" = skip ]; then
    echo "   sluice  wall ${sw}s cpu ${sc}s ($(grep -o 'complete in [^:]*: [0-9]* documents, [0-9]* errors' "$W/sluice.log" || echo "no summary"))"
    echo "   batch   wall ${bw}s cpu ${bc}s ($(ls "$W/batch" | wc -l) pdfs)"
    echo "   ratios  sluice/batch wall $(ratio "$sw" "$bw") cpu $(ratio "$sc" "$bc")"
    continue
  fi
  # The listener is started (and made warm by one conversion) before the timed calls.
  $UNOCONV --listener --port "$PORT" >"$W/listener.log" 2>&1 &
  LISTENER=$!
  mkdir -p "$W/uno"
  # Its first start makes a profile (tens of seconds on a fresh machine): wait up to 2 minutes
  # for the first conversion, then convert one document of each other kind, so that Calc and
  # Impress are loaded too, as in a listener that has served for a while.
  # A listener that ended (LibreOffice restarting itself, above) is started again.
  warm=""
  for _ in $(seq 600); do
    if ! kill -0 "$LISTENER" 2>/dev/null; then
      wait "$LISTENER" 2>/dev/null || true
      $UNOCONV --listener --port "$PORT" >>"$W/listener.log" 2>&1 &
      LISTENER=$!
    fi
    $UNOCONV --port "$PORT" -f pdf -o "$W/uno/warmup.pdf" "$FIRST" 2>"$W/warmup.err" && { warm=1; break; }
    sleep 0.2
  done
  [ -n "$warm" ] || { echo "the unoconv listener did not convert a document in 2 minutes:" >&2; tail -3 "$W/warmup.err" "$W/listener.log" >&2; exit 1; }
  for ext in docx xlsx pptx ods odp; do
    fs=("$W"/docs/*."$ext")
    f=${fs[0]}
    if [ -f "$f" ]; then $UNOCONV --port "$PORT" -f pdf -o "$W/uno/warmup-$ext.pdf" "$f" >/dev/null 2>&1 || true; fi
  done
  rm -f "$W"/uno/warmup*.pdf
  lcpu0=$(listener_cpu)
  read -r _ uw uc < <(timed unoconv sh -c 'for f in "$0"/docs/*; do $2 --port "$1" -f pdf -o "$0/uno/" "$f" || exit 1; done' "$W" "$PORT" "$UNOCONV")
  # The listener's LibreOffice does the converting: its CPU over the calls counts too.
  uc=$(echo "$uc + $(listener_cpu) - $lcpu0" | bc)
  kill "$LISTENER" 2>/dev/null || true
  wait "$LISTENER" 2>/dev/null || true
  LISTENER=""
  pdfs=$(ls "$W/batch" | wc -l)
  docs=$(grep -o 'complete in [^:]*: [0-9]* documents, [0-9]* errors' "$W/sluice.log" || echo "no summary")
  echo "   sluice  wall ${sw}s cpu ${sc}s ($docs)"
  echo "   batch   wall ${bw}s cpu ${bc}s ($pdfs pdfs)"
  echo "   unoconv wall ${uw}s cpu ${uc}s"
  echo "   ratios  sluice/batch wall $(ratio "$sw" "$bw") cpu $(ratio "$sc" "$bc");" \
    "sluice/unoconv wall $(ratio "$sw" "$uw") cpu $(ratio "$sc" "$uc")"
done
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
