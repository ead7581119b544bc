package pronom_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"image"
	"image/gif"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/pronom"
)

// sample files made here, each as its format's specification lays it out.
func samples(t *testing.T) map[string][]byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	var pngb, gifb, zipb bytes.Buffer
	if err := png.Encode(&pngb, img); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gifb, img, nil); err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(&zipb)
	w, _ := zw.Create("a.txt")
	w.Write([]byte("hello"))
	zw.Close()
	// A little-endian TIFF: header, one IFD of no entries.
	tiff := append([]byte("II*\x00\x08\x00\x00\x00"), 0, 0, 0, 0, 0, 0)
	// A PCM WAVE file of one second of silence, 8 kHz mono 8-bit.
	var wav bytes.Buffer
	data := make([]byte, 8000)
	wav.WriteString("RIFF")
	binary.Write(&wav, binary.LittleEndian, uint32(36+len(data)))
	wav.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(8000), uint32(8000), uint16(1), uint16(8)} {
		if err := binary.Write(&wav, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	wav.WriteString("data")
	binary.Write(&wav, binary.LittleEndian, uint32(len(data)))
	wav.Write(data)
	pdf := "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n" +
		"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
	return map[string][]byte{"a.png": pngb.Bytes(), "a.gif": gifb.Bytes(), "a.zip": zipb.Bytes(), "a.tif": tiff,
		"a.wav": wav.Bytes(), "a.pdf": []byte(pdf), "notes.txt": []byte("plain words\n"), "b.tif": []byte("not a tiff at all")}
}

// TestIdentify identifies files made here by PRONOM's signatures: each by its PUID, on its
// signature (a GIF's needs its trailer, at the end of the file) or, with none matching, on its
// extension; and a file no signature or extension names as nothing.
func TestIdentify(t *testing.T) {
	t.Parallel()
	s := samples(t)
	for _, tc := range []struct{ name, puid, basis string }{
		{"a.tif", "fmt/353", "signature"},
		{"a.pdf", "fmt/18", "signature"},
		{"a.gif", "fmt/4", "signature"},
		{"a.zip", "x-fmt/263", "signature"},
		{"a.wav", "fmt/141", "signature"},
		{"notes.txt", "x-fmt/111", "extension"},
	} {
		r, n, err := pronom.IdentifyReader(tc.name, bytes.NewReader(s[tc.name]), nil)
		if err != nil || n != int64(len(s[tc.name])) || r.PUID() != tc.puid || r.Basis != tc.basis || r.Signatures != pronom.SignatureVersion {
			t.Errorf("%s: %+v (%d bytes, %v); want %s on its %s", tc.name, r, n, err, tc.puid, tc.basis)
		}
	}
	// A PNG is one of PRONOM's PNG versions (which depends on its chunks).
	if r, _, _ := pronom.IdentifyReader("a.png", bytes.NewReader(s["a.png"]), nil); !strings.HasPrefix(r.Formats[0].Name, "Portable Network Graphics") {
		t.Errorf("a.png: %+v", r)
	}
	// The GIF without its trailer byte: its signature (BOF and EOF) no longer holds.
	gif := s["a.gif"]
	if r, _, _ := pronom.IdentifyReader("a.bin", bytes.NewReader(gif[:len(gif)-1]), nil); r.PUID() == "fmt/4" {
		t.Errorf("a GIF without its trailer is still %+v", r)
	}
	if r, _, _ := pronom.IdentifyReader("blob.unknownext", bytes.NewReader([]byte{1, 2, 3}), nil); r.Basis != "" || len(r.Formats) != 0 {
		t.Errorf("three bytes of nothing: %+v", r)
	}
}

// TestTail keeps the first and last Window bytes of what is written to it, however the writes
// are cut.
func TestTail(t *testing.T) {
	t.Parallel()
	all := make([]byte, 3*pronom.Window+123)
	for i := range all {
		all[i] = byte(i * 7)
	}
	for _, chunk := range []int{1, 1000, pronom.Window, len(all)} {
		tl := &pronom.Tail{}
		for p := all; len(p) > 0; {
			k := min(chunk, len(p))
			tl.Write(p[:k])
			p = p[k:]
		}
		if !bytes.Equal(tl.Head(), all[:pronom.Window]) || !bytes.Equal(tl.Tail(), all[len(all)-pronom.Window:]) {
			t.Errorf("writes of %d bytes: head or tail wrong", chunk)
		}
	}
	small := &pronom.Tail{}
	small.Write([]byte("abc"))
	if string(small.Head()) != "abc" || string(small.Tail()) != "abc" {
		t.Errorf("a small file: head %q tail %q", small.Head(), small.Tail())
	}
}

// TestIdentifyBounded identifies adversarial files — a window of one repeated byte, of random
// bytes — each in bounded time (every signature's matching is cut at its step bound).
func TestIdentifyBounded(t *testing.T) {
	t.Parallel()
	for _, b := range []byte{0x00, 0x20, 0xFF} {
		buf := bytes.Repeat([]byte{b}, 2*pronom.Window)
		start := time.Now()
		if _, _, err := pronom.IdentifyReader("x", bytes.NewReader(buf), nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("a window of %#x took %s", b, d)
		} else {
			t.Logf("a window of %#x: %s", b, d)
		}
	}
}
