// Package pngenc writes the PNG thumbnails Sluice makes from rendered pages: it reads the raw
// image a renderer wrote (pdftoppm's PPM) and encodes it itself, as an 8-bit grayscale PNG when
// every pixel is gray (most document pages) and as RGB otherwise.
//
// It exists because libpng, as pdftoppm calls it, filters every row of every page and took
// 17–43 ms of the 47–61 ms a 700-pixel thumbnail cost; a page of text on white compresses better
// unfiltered (a journal's first page 172 KB through pdftoppm's PNG, 69 KB here, in 3 ms). Rows
// are filtered only for pages that DEFLATE alone leaves large, as photographs are.
package pngenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// filterAbove is the share of the raw rows' bytes above which an unfiltered page is tried again
// with filtered rows (and the smaller kept): pages of text deflate to 1–18 % of their rows, a
// photograph to three quarters.
const filterAbove = 3

// ErrMalformed is returned for an image that is not a binary PPM or PGM of 8-bit samples within
// the bounds given, with exactly its pixels.
var ErrMalformed = errors.New("malformed image")

// EncodePNM encodes a binary PPM (P6) or PGM (P5) image with 8-bit samples, neither side longer
// than maxSide, as a PNG. The image must be the whole input: nothing before or after it.
func EncodePNM(pnm []byte, maxSide int) ([]byte, error) {
	w, h, ch, pix, err := parsePNM(pnm, maxSide)
	if err != nil {
		return nil, err
	}
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	return e.encode(w, h, ch, pix)
}

// parsePNM reads the header — magic, width, height, maximum value, each after whitespace or
// comments — and returns the pixels that follow the single whitespace byte ending it.
func parsePNM(b []byte, maxSide int) (w, h, ch int, pix []byte, err error) {
	if len(b) < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6') {
		return 0, 0, 0, nil, fmt.Errorf("%w: not a binary PPM or PGM", ErrMalformed)
	}
	ch = 1
	if b[1] == '6' {
		ch = 3
	}
	i := 2
	var v [3]int
	for k := range v {
		for i < len(b) && (isSpace(b[i]) || b[i] == '#') {
			if b[i] == '#' {
				for i < len(b) && b[i] != '\n' {
					i++
				}
				continue
			}
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-j < 6 {
			i++
		}
		n, err := strconv.Atoi(string(b[j:i]))
		if err != nil || n <= 0 {
			return 0, 0, 0, nil, fmt.Errorf("%w: bad header", ErrMalformed)
		}
		v[k] = n
	}
	if i >= len(b) || !isSpace(b[i]) {
		return 0, 0, 0, nil, fmt.Errorf("%w: bad header", ErrMalformed)
	}
	i++
	w, h = v[0], v[1]
	if w > maxSide || h > maxSide {
		return 0, 0, 0, nil, fmt.Errorf("%w: %d×%d is larger than %d pixels a side", ErrMalformed, w, h, maxSide)
	}
	if v[2] != 255 {
		return 0, 0, 0, nil, fmt.Errorf("%w: samples of more than 8 bits", ErrMalformed)
	}
	if len(b)-i != w*h*ch {
		return 0, 0, 0, nil, fmt.Errorf("%w: %d bytes of pixels for %d×%d", ErrMalformed, len(b)-i, w, h)
	}
	return w, h, ch, b[i:], nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// encoder is EncodePNM's reusable state: a row with its filter byte, the previous row and the
// five filters' candidates, the compressor and its output. Rows are compressed as they are made,
// so that the state stays a few rows and the compressed image.
type encoder struct {
	row, prev []byte
	cand      [5][]byte
	idat      bytes.Buffer
	z         *zlib.Writer
}

var encoders = sync.Pool{New: func() any {
	z, _ := zlib.NewWriterLevel(io.Discard, zlib.DefaultCompression)
	return &encoder{z: z}
}}

func (e *encoder) encode(w, h, ch int, pix []byte) ([]byte, error) {
	out := ch // samples a pixel in the PNG
	if ch == 3 && allGray(pix) {
		out = 1
	}
	idat, err := e.deflate(w, h, ch, out, pix, false)
	if err != nil {
		return nil, err
	}
	if len(idat)*filterAbove > (w*out+1)*h {
		alt, err := e.deflate(w, h, ch, out, pix, true)
		if err != nil {
			return nil, err
		}
		if len(alt) < len(idat) {
			idat = alt
		}
	}
	var png bytes.Buffer
	png.Grow(len(idat) + 64)
	png.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 0 // 8 bits a sample, grayscale; compression, filter, interlace 0
	if out == 3 {
		ihdr[9] = 2 // RGB
	}
	WriteChunk(&png, "IHDR", ihdr[:])
	WriteChunk(&png, "IDAT", idat)
	WriteChunk(&png, "IEND", nil)
	return png.Bytes(), nil
}

// deflate compresses the image's rows, each with its filter byte — none, or with filtered the
// filter [encoder.filter] chooses — as a zlib stream, out samples a pixel (1 for a gray image
// read as RGB: its first sample). It returns a copy of the stream.
func (e *encoder) deflate(w, h, ch, out int, pix []byte, filtered bool) ([]byte, error) {
	stride := w * out
	e.row = grow(e.row, stride+1)
	e.prev = grow(e.prev, stride)
	clear(e.prev)
	e.idat.Reset()
	e.z.Reset(&e.idat)
	for y := range h {
		src := pix[y*w*ch : (y+1)*w*ch]
		row := e.row[1:]
		if out == ch {
			copy(row, src)
		} else {
			for i := range row {
				row[i] = src[i*ch]
			}
		}
		line := e.row
		line[0] = 0
		if filtered {
			line = e.filter(row, out)
		}
		if _, err := e.z.Write(line); err != nil {
			return nil, fmt.Errorf("png: %w", err)
		}
		copy(e.prev, row)
	}
	if err := e.z.Close(); err != nil {
		return nil, fmt.Errorf("png: %w", err)
	}
	return bytes.Clone(e.idat.Bytes()), nil
}

// filter returns row, bpp bytes a pixel, with its filter byte first, filtered the way libpng's
// heuristic chooses: of the five filters, the one whose bytes, read as signed, have the least sum
// of magnitudes. e.prev holds the row above.
func (e *encoder) filter(row []byte, bpp int) []byte {
	best, bestSum := 0, -1
	for f := range e.cand {
		e.cand[f] = grow(e.cand[f], len(row)+1)
		c, sum := e.cand[f], 0
		c[0] = byte(f)
		for i, x := range row {
			var a, b, d byte
			if i >= bpp {
				a, d = row[i-bpp], e.prev[i-bpp]
			}
			b = e.prev[i]
			var v byte
			switch f {
			case 0:
				v = x
			case 1:
				v = x - a
			case 2:
				v = x - b
			case 3:
				v = x - byte((int(a)+int(b))/2)
			case 4:
				v = x - paeth(a, b, d)
			}
			c[i+1] = v
			if s := int(int8(v)); s < 0 {
				sum -= s
			} else {
				sum += s
			}
		}
		if bestSum < 0 || sum < bestSum {
			best, bestSum = f, sum
		}
	}
	return e.cand[best]
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// allGray reports whether every RGB pixel of pix has equal samples.
func allGray(pix []byte) bool {
	for i := 0; i+2 < len(pix); i += 3 {
		if pix[i] != pix[i+1] || pix[i] != pix[i+2] {
			return false
		}
	}
	return true
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// WriteChunk appends one PNG chunk: length, type, data, CRC of type and data.
func WriteChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	out.WriteString(typ)
	out.Write(data)
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}
