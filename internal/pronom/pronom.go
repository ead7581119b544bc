// Package pronom identifies file formats by PRONOM's internal signatures, as DROID and
// siegfried do, and names them by their PUIDs (fmt/353, x-fmt/263 …): the identification the
// digital-preservation field records beside a MIME type.
//
// The signatures are The National Archives' DROID signature file (V118, 2024-04-29; Crown
// copyright, Open Government Licence v3.0), embedded gzipped. Every internal signature's byte
// sequences are matched — anchored at the file's beginning (BOFoffset), at its end (EOFoffset)
// or anywhere (no reference) — with their subsequences' offset ranges, their left and right
// fragments (alternatives at one position, byte ranges [10:EB], negations [!00]) and gaps.
// Among the formats whose signatures match, those another matching format has priority over
// are dropped (DROID's rule). With none matching, the formats claiming the file's extension are
// returned, marked as such. Container signatures (formats inside zip or OLE2 files) are not
// read: such a file is identified as its container (a zip, x-fmt/263).
//
// A file is read through its first and last [Window] bytes: a sequence that lies beyond them
// (an unbounded offset in a larger file) is not found there.
package pronom

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:embed DROID_SignatureFile_V118.xml.gz
var signatureFile []byte

// SignatureVersion is the version of the DROID signature file the identification uses.
const SignatureVersion = 118

// Window is how many bytes of a file's beginning, and of its end, identification reads.
const Window = 64 << 10

// Format is one PRONOM format a file was identified as.
type Format struct {
	PUID    string `json:"puid"`
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	MIME    string `json:"mime_type,omitempty"`
}

// Result is what identifying a file found: its formats, best first, and the basis — "signature"
// (an internal signature matched) or "extension" (none did; the formats claiming the file's
// extension), or "" when neither found any.
type Result struct {
	Formats []Format `json:"formats"`
	Basis   string   `json:"basis"`
	// Signatures is the version of the DROID signature file used.
	Signatures int `json:"signature_file_version"`
}

// PUID returns the first format's PUID, "" when there is none.
func (r *Result) PUID() string {
	if len(r.Formats) == 0 {
		return ""
	}
	return r.Formats[0].PUID
}

// Identify identifies a file of size bytes from its head (its first bytes, up to [Window]) and
// tail (its last bytes, up to Window; the head again for a small file), named name (for the
// extension).
func Identify(name string, head, tail []byte, size int64) (*Result, error) {
	db, err := load()
	if err != nil {
		return nil, err
	}
	res := &Result{Formats: []Format{}, Signatures: SignatureVersion}
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(name), "."))
	claim := map[string]bool{}
	matched := map[int]bool{}
	for _, f := range db.formats {
		for _, sid := range f.sigs {
			if s := db.sigs[sid]; s != nil && !matched[f.id] && s.matches(head, tail, size) {
				matched[f.id] = true
			}
		}
	}
	if len(matched) > 0 {
		res.Basis = "signature"
		for _, f := range db.formats {
			if !matched[f.id] {
				continue
			}
			beaten := false
			for _, g := range db.formats {
				if matched[g.id] && g.id != f.id && slices.Contains(g.priorityOver, f.id) {
					beaten = true
				}
			}
			if !beaten {
				res.Formats = append(res.Formats, f.Format)
				if slices.Contains(f.exts, ext) {
					claim[f.PUID] = true
				}
			}
		}
		// Of several, those that claim the file's extension come first (DROID's tie-break).
		slices.SortStableFunc(res.Formats, func(a, b Format) int {
			switch {
			case claim[a.PUID] && !claim[b.PUID]:
				return -1
			case claim[b.PUID] && !claim[a.PUID]:
				return 1
			}
			return 0
		})
		return res, nil
	}
	for _, f := range db.formats {
		if ext != "" && slices.Contains(f.exts, ext) {
			res.Formats = append(res.Formats, f.Format)
		}
	}
	if len(res.Formats) > 0 {
		res.Basis = "extension"
	}
	return res, nil
}

// IdentifyReader reads r (size bytes, or -1 when unknown) once, keeping its first and last
// [Window] bytes, and identifies it. It is [Identify] for a stream; w, when not nil, is given
// every byte read (to hash the file in the same read).
func IdentifyReader(name string, r io.Reader, w io.Writer) (*Result, int64, error) {
	t := &Tail{}
	if w != nil {
		r = io.TeeReader(r, w)
	}
	n, err := io.Copy(t, r)
	if err != nil {
		return nil, n, err
	}
	res, err := Identify(name, t.Head(), t.Tail(), n)
	return res, n, err
}

// Tail is an io.Writer that keeps the first and the last [Window] bytes written to it.
type Tail struct {
	head []byte
	ring []byte
	pos  int  // where the next byte goes in ring
	full bool // ring has wrapped
}

// Write implements io.Writer.
func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(t.head) < Window {
		k := min(Window-len(t.head), len(p))
		t.head = append(t.head, p[:k]...)
	}
	if t.ring == nil {
		t.ring = make([]byte, Window)
	}
	if len(p) >= Window {
		copy(t.ring, p[len(p)-Window:])
		t.pos, t.full = 0, true
		return n, nil
	}
	for len(p) > 0 {
		k := copy(t.ring[t.pos:], p)
		p = p[k:]
		t.pos += k
		if t.pos == Window {
			t.pos, t.full = 0, true
		}
	}
	return n, nil
}

// Head returns the first bytes written, up to Window.
func (t *Tail) Head() []byte { return t.head }

// Tail returns the last bytes written, up to Window.
func (t *Tail) Tail() []byte {
	if !t.full {
		return t.ring[:t.pos]
	}
	return append(slices.Clone(t.ring[t.pos:]), t.ring[:t.pos]...)
}

// The signature file, as it is read.
type xmlFile struct {
	Sigs []struct {
		ID   int `xml:"ID,attr"`
		Seqs []struct {
			Reference  string   `xml:"Reference,attr"`
			Endianness string   `xml:"Endianness,attr"`
			Subs       []xmlSub `xml:"SubSequence"`
		} `xml:"ByteSequence"`
	} `xml:"InternalSignatureCollection>InternalSignature"`
	Formats []struct {
		ID       int      `xml:"ID,attr"`
		PUID     string   `xml:"PUID,attr"`
		Name     string   `xml:"Name,attr"`
		Version  string   `xml:"Version,attr"`
		MIME     string   `xml:"MIMEType,attr"`
		Sigs     []int    `xml:"InternalSignatureID"`
		Exts     []string `xml:"Extension"`
		Priority []int    `xml:"HasPriorityOverFileFormatID"`
	} `xml:"FileFormatCollection>FileFormat"`
}

type xmlSub struct {
	Position int       `xml:"Position,attr"`
	Min      string    `xml:"SubSeqMinOffset,attr"`
	Max      string    `xml:"SubSeqMaxOffset,attr"`
	Sequence string    `xml:"Sequence"`
	Left     []xmlFrag `xml:"LeftFragment"`
	Right    []xmlFrag `xml:"RightFragment"`
}

type xmlFrag struct {
	Position int    `xml:"Position,attr"`
	Min      string `xml:"MinOffset,attr"`
	Max      string `xml:"MaxOffset,attr"`
	Value    string `xml:",chardata"`
}

// database is the signature file, compiled.
type database struct {
	sigs    map[int]*signature
	formats []*format
}

type format struct {
	Format
	id           int
	sigs         []int
	exts         []string
	priorityOver []int
}

// signature is an internal signature: every one of its byte sequences must match.
type signature struct{ seqs []*byteSequence }

// byteSequence is a list of subsequences, each a list of elements in file order; at BOF the
// first subsequence starts within its offset range of the beginning, at EOF the last ends within
// its range of the end (the elements are then kept reversed, matched on the reversed tail).
type byteSequence struct {
	ref  string // "BOF", "EOF", "" (anywhere)
	subs []*subsequence
}

type subsequence struct {
	min, max int // the offset range of its first element from the anchor; max -1: unbounded
	elems    []element
}

// element is one position of a subsequence: alternatives (fragments at one position, or the
// sequence), each a list of tokens, and the gap range before it.
type element struct {
	gapMin, gapMax int // max -1: unbounded
	alts           [][]token
}

// token matches n bytes: a literal, a range of n-byte values, or anything but a value.
type token struct {
	kind   byte // 'b' literal, 'r' range, 'n' not
	lit    []byte
	lo, hi uint64
	n      int
	little bool
}

var (
	loadOnce sync.Once
	loaded   *database
	loadErr  error
)

func load() (*database, error) {
	loadOnce.Do(func() { loaded, loadErr = compile(signatureFile) })
	return loaded, loadErr
}

func compile(gz []byte) (*database, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("pronom: the signature file: %w", err)
	}
	var f xmlFile
	if err := xml.NewDecoder(zr).Decode(&f); err != nil {
		return nil, fmt.Errorf("pronom: the signature file: %w", err)
	}
	db := &database{sigs: map[int]*signature{}}
	for _, s := range f.Sigs {
		sig := &signature{}
		ok := true
		for _, bs := range s.Seqs {
			seq := &byteSequence{}
			switch bs.Reference {
			case "BOFoffset":
				seq.ref = "BOF"
			case "EOFoffset":
				seq.ref = "EOF"
			}
			little := bs.Endianness == "Little-endian"
			subs := slices.Clone(bs.Subs)
			slices.SortFunc(subs, func(a, b xmlSub) int {
				return a.Position - b.Position
			})
			for _, ss := range subs {
				sub := &subsequence{min: offset(ss.Min, 0), max: offset(ss.Max, -1)}
				main, err := parsePattern(ss.Sequence, little)
				if err != nil {
					ok = false
					break
				}
				left, err := fragments(ss.Left, little)
				if err != nil {
					ok = false
					break
				}
				right, err := fragments(ss.Right, little)
				if err != nil {
					ok = false
					break
				}
				// In file order: the left fragments from the farthest, each gap the one after
				// it; the sequence; the right fragments, each gap the one before it.
				var elems []element
				for i := len(left) - 1; i >= 0; i-- {
					elems = append(elems, element{alts: left[i].alts})
				}
				elems = append(elems, element{alts: [][]token{main}})
				for i := len(left) - 1; i >= 0; i-- {
					elems[len(left)-i].gapMin, elems[len(left)-i].gapMax = left[i].gapMin, left[i].gapMax
				}
				elems = append(elems, right...)
				sub.elems = elems
				seq.subs = append(seq.subs, sub)
			}
			if !ok {
				break
			}
			if seq.ref == "EOF" {
				seq.reverse()
			}
			sig.seqs = append(sig.seqs, seq)
		}
		if ok && len(sig.seqs) > 0 {
			db.sigs[s.ID] = sig
		}
	}
	for _, ff := range f.Formats {
		fm := &format{Format: Format{PUID: ff.PUID, Name: ff.Name, Version: ff.Version, MIME: ff.MIME}, id: ff.ID, sigs: ff.Sigs,
			priorityOver: ff.Priority}
		for _, e := range ff.Exts {
			fm.exts = append(fm.exts, strings.ToLower(e))
		}
		db.formats = append(db.formats, fm)
	}
	return db, nil
}

// fragments compiles a subsequence's left or right fragments: one element per position, its
// alternatives the fragments at that position, in position order.
func fragments(fs []xmlFrag, little bool) ([]element, error) {
	byPos := map[int]*element{}
	var positions []int
	for _, f := range fs {
		p, err := parsePattern(f.Value, little)
		if err != nil {
			return nil, err
		}
		e := byPos[f.Position]
		if e == nil {
			e = &element{gapMin: offset(f.Min, 0), gapMax: offset(f.Max, -1)}
			byPos[f.Position] = e
			positions = append(positions, f.Position)
		}
		e.alts = append(e.alts, p)
	}
	slices.Sort(positions)
	out := make([]element, len(positions))
	for i, p := range positions {
		out[i] = *byPos[p]
	}
	return out, nil
}

func offset(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return def
	}
	return n
}

// parsePattern compiles a sequence or fragment: hex bytes, [lo:hi] ranges of values of as many
// bytes as their bounds, and [!xx…] negations.
func parsePattern(s string, little bool) ([]token, error) {
	var out []token
	s = strings.TrimSpace(s)
	for len(s) > 0 {
		if s[0] == '[' {
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("pronom: unclosed [ in %q", s)
			}
			body := s[1:end]
			s = s[end+1:]
			if rest, ok := strings.CutPrefix(body, "!"); ok {
				b, err := hex.DecodeString(rest)
				if err != nil || len(b) == 0 {
					return nil, fmt.Errorf("pronom: bad negation [%s]", body)
				}
				out = append(out, token{kind: 'n', lit: b, n: len(b)})
				continue
			}
			lo, hi, ok := strings.Cut(body, ":")
			bl, err1 := hex.DecodeString(lo)
			bh, err2 := hex.DecodeString(hi)
			if !ok || err1 != nil || err2 != nil || len(bl) != len(bh) || len(bl) == 0 || len(bl) > 8 {
				return nil, fmt.Errorf("pronom: bad range [%s]", body)
			}
			out = append(out, token{kind: 'r', lo: be(bl), hi: be(bh), n: len(bl), little: little})
			continue
		}
		if len(s) < 2 {
			return nil, fmt.Errorf("pronom: odd hex in %q", s)
		}
		b, err := hex.DecodeString(s[:2])
		if err != nil {
			return nil, fmt.Errorf("pronom: bad byte %q", s[:2])
		}
		if n := len(out); n > 0 && out[n-1].kind == 'b' {
			out[n-1].lit = append(out[n-1].lit, b[0])
			out[n-1].n++
		} else {
			out = append(out, token{kind: 'b', lit: b, n: 1})
		}
		s = s[2:]
	}
	return out, nil
}

func be(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// reverse turns an EOF byte sequence into one matched from the start of the reversed tail: the
// subsequences, their elements and every token's bytes in reverse, each gap moved to the
// element it now precedes.
func (bs *byteSequence) reverse() {
	for _, sub := range bs.subs {
		els := sub.elems
		n := len(els)
		rev := make([]element, n)
		for i := range els {
			e := els[n-1-i]
			alts := make([][]token, len(e.alts))
			for j, a := range e.alts {
				ra := make([]token, len(a))
				for k, tk := range a {
					tk.lit = slices.Clone(tk.lit)
					slices.Reverse(tk.lit)
					tk.little = !tk.little
					ra[len(a)-1-k] = tk
				}
				alts[j] = ra
			}
			rev[i].alts = alts
			if i > 0 {
				// The gap before rev[i] is the one that was after it: before els[n-i].
				rev[i].gapMin, rev[i].gapMax = els[n-i].gapMin, els[n-i].gapMax
			}
		}
		sub.elems = rev
	}
	// Position 1 is the subsequence nearest the end: first in the reversed tail. They were
	// sorted by position, so they are in order already.
}

// maxSteps bounds the work of matching one signature against one file (tokens tried): an
// adversarial file cannot make a signature with unbounded gaps take unbounded time. Past it,
// the signature does not match.
const maxSteps = 1 << 20

// matcher matches byte sequences against one buffer, counting its steps.
type matcher struct {
	buf   []byte
	steps int
}

func (s *signature) matches(head, tail []byte, size int64) bool {
	var rtail []byte
	for _, bs := range s.seqs {
		switch bs.ref {
		case "BOF":
			if !(&matcher{buf: head}).subs(bs.subs, 0, false) {
				return false
			}
		case "EOF":
			if rtail == nil {
				rtail = slices.Clone(tail)
				slices.Reverse(rtail)
			}
			if !(&matcher{buf: rtail}).subs(bs.subs, 0, false) {
				return false
			}
		default:
			if !(&matcher{buf: head}).subs(bs.subs, 0, true) && (int64(len(head)) >= size || !(&matcher{buf: tail}).subs(bs.subs, 0, true)) {
				return false
			}
		}
	}
	return true
}

// subs reports whether the subsequences match in order, the first starting within its offset
// range of from (anywhere: at any offset).
func (m *matcher) subs(subs []*subsequence, from int, anywhere bool) bool {
	if len(subs) == 0 {
		return true
	}
	sub := subs[0]
	lo, hi := from+sub.min, from+sub.max
	if sub.max < 0 || anywhere {
		hi = len(m.buf)
	}
	// A first element that is one literal is looked for, not tried at every offset.
	var lit []byte
	if e := sub.elems[0]; len(e.alts) == 1 && len(e.alts[0]) > 0 && e.alts[0][0].kind == 'b' {
		lit = e.alts[0][0].lit
	}
	for start := lo; start <= hi && start <= len(m.buf) && m.steps < maxSteps; start++ {
		if lit != nil {
			i := bytes.Index(m.buf[start:min(len(m.buf), hi+len(lit))], lit)
			if i < 0 {
				return false
			}
			start += i
		}
		found := false
		m.elems(sub.elems, start, func(end int) bool {
			found = m.subs(subs[1:], end, false)
			return found
		})
		if found {
			return true
		}
	}
	return false
}

// elems matches the elements with the first exactly at at, calling done with each end a full
// match reaches until done returns true.
func (m *matcher) elems(elems []element, at int, done func(end int) bool) bool {
	if len(elems) == 0 {
		return done(at)
	}
	for _, alt := range elems[0].alts {
		end, ok := m.tokens(alt, at)
		if !ok {
			continue
		}
		if len(elems) == 1 {
			if done(end) {
				return true
			}
			continue
		}
		next := elems[1]
		hi := end + next.gapMax
		if next.gapMax < 0 {
			hi = len(m.buf)
		}
		for p := end + next.gapMin; p <= hi && p <= len(m.buf) && m.steps < maxSteps; p++ {
			if m.elems(elems[1:], p, done) {
				return true
			}
		}
	}
	return false
}

func (m *matcher) tokens(toks []token, at int) (int, bool) {
	m.steps++
	for _, t := range toks {
		if at+t.n > len(m.buf) {
			return 0, false
		}
		b := m.buf[at : at+t.n]
		switch t.kind {
		case 'b':
			if !bytes.Equal(b, t.lit) {
				return 0, false
			}
		case 'n':
			if bytes.Equal(b, t.lit) {
				return 0, false
			}
		case 'r':
			v := be(b)
			if t.little {
				v = le(b)
			}
			if v < t.lo || v > t.hi {
				return 0, false
			}
		}
		at += t.n
	}
	return at, true
}

func le(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
