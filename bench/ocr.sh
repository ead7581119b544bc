#!/bin/bash
# ocr.sh: issue #40's OCR benchmark in one command. The same scanned PDFs OCRed three ways in each
# round, back to back, so that every ratio compares figures of the same minutes:
#   sluice    `sluice ingest --ocr` of the PDFs (it also makes each PDF's thumbnail and stores
#             the documents, which the peers do not),
#   ocrmypdf  `ocrmypdf --jobs 2 --sidecar` of each PDF in turn (its defaults otherwise: a PDF/A
#             with a text layer is written too),
#   plain     `pdftoppm -r 300 -gray` then `tesseract` on each page, 2 PDFs at a time (xargs -P 2),
#             OMP_THREAD_LIMIT=1 as Sluice runs tesseract.
# Each figure is the whole command's wall and CPU (user+sys of it and its children, GNU time);
# the ratios are sluice/ocrmypdf and sluice/plain per round. The load average is printed with
# each round: the machine may be shared.
#
# The scans. The corpus holds one scanned PDF (testOCR.pdf: no text to compare with, only the
# phrase expected.json names), so the others are made here from pages whose text is known: the
# corpus's text PDFs (testJournalParser.pdf's first 6 pages, one PDF each, testPDF_acroform3.pdf)
# and the first pages of two office documents (converted once by soffice), each page rendered at
# 200 dpi in gray, turned by a fraction of a degree, given light noise and saved as a JPEG at
# quality 70 inside an image-only PDF (img2pdf): the way a sheet fed through an office scanner
# comes out. The expected text of each is pdftotext of its source pages (reading order, not
# -layout: the journal's two columns side by side would not be the order anyone reads them in).
#
# Text quality: the word error rate of each tool's text against the expected text — word-level
# edit distance (substitutions, insertions, deletions) over the expected words, words being runs
# of letters and digits, lowercased — summed over the files (total edits / total expected words).
# The edit distance counts a block read in another order (a caption, the second column) as
# errors, so the bag-of-words error rate is printed too: the words the two texts do not have in
# common, as multisets (max(expected, got) − common), over the expected words; it is blind to
# order. For testOCR.pdf: whether the phrase expected.json names was found ("phrase found").
#
# Usage: SLUICE=/path/to/sluice bench/ocr.sh [ROUNDS]   (default 3)
# Needs ocrmypdf, tesseract (eng), pdftoppm, pdftotext, soffice, GNU time (/usr/bin/time) and
# Debian's python3 with PIL and img2pdf (python3-pil, python3-img2pdf: both come with ocrmypdf);
# the corpus at ../shared/corpus (CORPUS= to change).
set -euo pipefail
SLUICE=${SLUICE:?a sluice binary (go build -o /tmp/sluice ./cmd/sluice)}
ROUNDS=${1:-3}
CORPUS=${CORPUS:-$(cd "$(dirname "$0")/../../shared/corpus" && pwd)}
PY=${PY:-/usr/bin/python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/scans" "$W/expected" "$W/src"

# scan SRC FIRST LAST NAME: pages FIRST..LAST of SRC as the image-only PDF scans/NAME.pdf, and
# their text as expected/NAME.txt.
scan() {
  local src=$1 first=$2 last=$3 name=$4
  pdftotext -f "$first" -l "$last" "$src" "$W/expected/$name.txt"
  pdftoppm -r 200 -gray -png -f "$first" -l "$last" "$src" "$W/src/$name"
  "$PY" - "$W/scans/$name.pdf" "$W/src/$name"-*.png <<'EOF'
import io, random, sys, zlib
import img2pdf
from PIL import Image, ImageChops
out, pages = sys.argv[1], sys.argv[2:]
# The same turn for the same name, run after run; the noise is PIL's own (unseeded), so the
# scans, and the error rates, may differ a little between runs of the script, not between rounds.
rnd = random.Random(zlib.crc32(out.encode()))
jpegs = []
for p in pages:
    im = Image.open(p).convert("L")
    im = im.rotate(rnd.uniform(-0.8, 0.8), resample=Image.BICUBIC, expand=False, fillcolor=255)
    noise = Image.effect_noise(im.size, 18).point(lambda v: v - 128 if v > 128 else 0)
    im = ImageChops.subtract(im, noise)  # specks of grey, darker where the noise is
    b = io.BytesIO()
    im.save(b, "JPEG", quality=70, dpi=(200, 200))
    jpegs.append(b.getvalue())
with open(out, "wb") as f:
    f.write(img2pdf.convert(jpegs))
EOF
  rm -f "$W/src/$name"-*.png
}
files=$CORPUS/files
for p in 1 2 3 4 5 6; do scan "$files/testJournalParser.pdf" "$p" "$p" "journal-p$p"; done
scan "$files/testPDF_acroform3.pdf" 1 1 acroform3
soffice --headless --norestore "-env:UserInstallation=file://$W/profile" --convert-to pdf \
  --outdir "$W/src" "$files/testWORD_various.docx" "$files/LibreOfficeWriter_odt_1.3.odt" >/dev/null 2>&1
scan "$W/src/testWORD_various.pdf" 1 1 word-various
scan "$W/src/LibreOfficeWriter_odt_1.3.pdf" 1 1 writer-odt
cp "$files/testOCR.pdf" "$W/scans/"
PHRASE=$("$PY" -c 'import json, sys
print(next(e["ocr_phrases"][0] for e in json.load(open(sys.argv[1])) if e["file"] == "testOCR.pdf"))' "$CORPUS/expected.json")
if [ "$(sha256sum "$W"/scans/* | cut -d' ' -f1 | sort -u | wc -l)" != "$(ls "$W/scans" | wc -l)" ]; then
  echo "the scans are not distinct" >&2
  exit 1
fi
N=$(ls "$W/scans" | wc -l)
PAGES=0
for f in "$W"/scans/*.pdf; do PAGES=$((PAGES + $(pdfinfo "$f" | awk '/^Pages:/ {print $2}'))); done

# wer DIR: the word error rate of DIR/NAME.txt against expected/NAME.txt over the scans that
# have expected text, its bag-of-words error rate, and whether DIR/testOCR.txt has the phrase:
# "WER bag-of-words B phrase found|missing".
cat >"$W/wer.py" <<'EOF'
import os, re, sys
from collections import Counter
got_dir, exp_dir, phrase = sys.argv[1], sys.argv[2], sys.argv[3]
def words(s):
    return re.findall(r"[^\W_]+", s.lower())
def edits(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]
def read(p):
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
def bag(ref, hyp):
    rc, hc = Counter(ref), Counter(hyp)
    return max(len(ref), len(hyp)) - sum((rc & hc).values())
total = errs = bagerrs = 0
for name in sorted(os.listdir(exp_dir)):
    ref = words(read(os.path.join(exp_dir, name)))
    hyp = words(read(os.path.join(got_dir, name)))
    total += len(ref)
    errs += edits(ref, hyp)
    bagerrs += bag(ref, hyp)
found = " ".join(words(phrase)) in " ".join(words(read(os.path.join(got_dir, "testOCR.txt"))))
print("%.3f bag-of-words %.3f phrase %s" % (errs / total, bagerrs / total, "found" if found else "missing"))
EOF
wer() { "$PY" "$W/wer.py" "$1" "$W/expected" "$PHRASE"; }

echo "== $N scanned PDFs, $PAGES pages, $ROUNDS rounds; $(nproc) CPUs"
# timed NAME CMD...: runs CMD, prints "NAME wall cpu" (seconds).
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$W/time" "$@" >"$W/$name.log" 2>&1 || { echo "$name failed:" >&2; tail -5 "$W/$name.log" >&2; }
  read -r wall user sys <"$W/time"
  echo "$name $wall $(echo "$user + $sys" | bc)"
}
ratio() { echo "scale=2; $1 / $2" | bc; }
for r in $(seq "$ROUNDS"); do
  echo "== round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$W/data" "$W/export" "$W/out-"*
  mkdir -p "$W/out-sluice" "$W/out-ocrmypdf" "$W/out-plain"
  read -r _ sw sc < <(timed sluice "$SLUICE" ingest --ocr --data "$W/data" "$W"/scans/*)
  "$SLUICE" documents export --data "$W/data" --out "$W/export" >/dev/null 2>&1
  for f in "$W"/scans/*.pdf; do
    b=$(basename "$f" .pdf)
    cat "$W/export/documents/$b.pdf"/*.txt >"$W/out-sluice/$b.txt" 2>/dev/null || true
  done
  read -r _ ow oc < <(timed ocrmypdf sh -c 'for f in "$0"/scans/*.pdf; do
      b=$(basename "$f" .pdf)
      ocrmypdf -q --jobs 2 --sidecar "$0/out-ocrmypdf/$b.txt" "$f" "$0/out-ocrmypdf/$b.pdf" || exit 1
    done' "$W")
  read -r _ pw pc < <(timed plain sh -c 'ls "$0"/scans/*.pdf | OMP_THREAD_LIMIT=1 xargs -P 2 -I{} sh -c '\''
      b=$(basename "$1" .pdf); d=$2/out-plain
      pdftoppm -r 300 -gray -png "$1" "$d/$b" &&
      for p in "$d/$b"-*.png; do tesseract "$p" - --psm 3 2>/dev/null; done >"$d/$b.txt" && rm -f "$d/$b"-*.png'\'' _ {} "$0"' "$W")
  docs=$(grep -o 'complete in [^:]*: [0-9]* documents, [0-9]* errors' "$W/sluice.log" || echo "no summary")
  echo "   sluice   wall ${sw}s cpu ${sc}s ($docs) word error rate $(wer "$W/out-sluice")"
  echo "   ocrmypdf wall ${ow}s cpu ${oc}s word error rate $(wer "$W/out-ocrmypdf")"
  echo "   plain    wall ${pw}s cpu ${pc}s word error rate $(wer "$W/out-plain")"
  echo "   ratios  sluice/ocrmypdf wall $(ratio "$sw" "$ow") cpu $(ratio "$sc" "$oc");" \
    "sluice/plain wall $(ratio "$sw" "$pw") cpu $(ratio "$sc" "$pc")"
done
echo "== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
