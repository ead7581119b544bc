package text

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/signintech/gopdf"
	"github.com/signintech/gopdf/fontmaker/core"
)

// DefaultFonts returns the TrueType fonts a [Renderer] tries, in order of preference: a
// monospace font first, then fallbacks for the characters it lacks. Fonts that are missing or
// that gopdf cannot embed (OpenType/CFF collections such as Noto CJK) are skipped.
func DefaultFonts() []string {
	return []string{
		"/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",       // fonts-dejavu-core
		"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",           // fonts-dejavu-core: Arabic, Hebrew, …
		"/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", // fonts-droid-fallback: CJK
		"/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",            // fonts-wqy-microhei: CJK
		"/usr/share/fonts/truetype/noto/NotoSansMono-Regular.ttf",   // fonts-noto-mono
		"/usr/share/fonts/truetype/liberation2/LiberationMono-Regular.ttf",
	}
}

// Page geometry: A4 portrait, half-inch margins, 9-point type on 11-point lines.
const (
	pageW, pageH = 595.28, 841.89
	margin       = 36.0
	fontSize     = 9.0
	lineHeight   = 11.0
	tabWidth     = 8
	linesPerPage = 69 // (pageH - 2*margin) / lineHeight, rounded down
)

// Renderer lays text out as a paged monospace PDF. It parses its fonts once, on first use, and
// is then safe for concurrent use; reuse one Renderer across tasks, since parsing the fonts
// costs far more than rendering a small file.
type Renderer struct {
	// Fonts are the font files to try, in order. Defaults to [DefaultFonts]().
	Fonts []string

	once  sync.Once
	err   error
	fc    *gopdf.FontContainer
	faces []face
	charW float64 // advance of the first (monospace) font at fontSize
	cols  int
	thumb thumbFonts
}

func (r *Renderer) fontList() []string {
	if r.Fonts != nil {
		return r.Fonts
	}
	return DefaultFonts()
}

// face is one loaded font: its family name in the container and the runes it has glyphs for.
type face struct {
	family string
	chars  map[int]uint
}

func (r *Renderer) load() error {
	r.once.Do(func() {
		paths := r.Fonts
		if paths == nil {
			paths = DefaultFonts()
		}
		r.fc = &gopdf.FontContainer{}
		for i, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var parser core.TTFParser
			if err := parser.ParseFontData(data); err != nil {
				continue
			}
			family := fmt.Sprintf("f%d", i)
			if err := r.fc.AddTTFFontData(family, data); err != nil {
				continue
			}
			if len(r.faces) == 0 {
				adv := 0.6
				if gid, ok := parser.Chars()['M']; ok && int(gid) < len(parser.Widths()) && parser.UnitsPerEm() > 0 {
					adv = float64(parser.Widths()[gid]) / float64(parser.UnitsPerEm())
				}
				r.charW = adv * fontSize
			}
			r.faces = append(r.faces, face{family: family, chars: parser.Chars()})
		}
		if len(r.faces) == 0 {
			r.err = fmt.Errorf("render text: no usable TrueType font among %s (apt-get install fonts-dejavu-core)", strings.Join(paths, ", "))
			return
		}
		r.cols = int((pageW - 2*margin) / r.charW)
	})
	return r.err
}

// Render returns text as a PDF: monospace lines wrapped at the page width, tabs expanded,
// as many A4 pages as needed (at least one). Text whose every character is in WinAnsiEncoding
// is set in the standard Courier font, not embedded; other text in the Renderer's fonts,
// embedded as subsets. Characters no font covers are drawn as "?".
func (r *Renderer) Render(text string) ([]byte, error) {
	if err := r.load(); err != nil {
		return nil, err
	}
	lines := r.layout(text, 0)
	if pdf, ok := renderWinAnsi(lines, r.charW); ok {
		return pdf, nil
	}
	// Pick the font of every rune first, so only fonts in use are embedded.
	used := make([]bool, len(r.faces))
	cells := 0
	for _, l := range lines {
		for _, c := range l {
			used[c.face] = true
		}
		cells += len(l)
	}
	if cells == 0 {
		// gopdf writes a broken font object for a font no glyph was drawn with.
		lines[0] = []cell{{r: ' ', face: 0}}
	}
	var pdf gopdf.GoPdf
	pdf.Start(gopdf.Config{PageSize: gopdf.Rect{W: pageW, H: pageH}, Unit: gopdf.UnitPT})
	pdf.SetCompressLevel(1) // text compresses well even at the fastest level
	used[0] = true
	for i, f := range r.faces {
		if used[i] {
			if err := pdf.AddTTFFontFromFontContainer(f.family, r.fc); err != nil {
				return nil, fmt.Errorf("render text: add font: %w", err)
			}
		}
	}
	perPage := linesPerPage
	for i := 0; i < len(lines) || i == 0; i += perPage {
		pdf.AddPage()
		for j := i; j < min(i+perPage, len(lines)); j++ {
			y := margin + float64(j-i)*lineHeight
			if err := r.drawLine(&pdf, lines[j], y); err != nil {
				return nil, err
			}
		}
	}
	var buf bytes.Buffer
	if _, err := pdf.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("render text: %w", err)
	}
	return buf.Bytes(), nil
}

// cell is one character placed on a line: its rune, column and font. Eight bytes: a large
// file is laid out as millions of them.
type cell struct {
	r    rune
	col  uint16 // < Renderer.cols
	face uint8  // an index of Renderer.faces
}

// layout splits text into display lines of at most r.cols columns, the first maxLines of them
// when maxLines > 0 (a thumbnail draws one page). The lines are slices of one array of cells,
// sized by the text's length: no character makes more than one cell.
func (r *Renderer) layout(text string, maxLines int) [][]cell {
	var lines [][]cell
	cells := make([]cell, 0, min(len(text), layoutCap(maxLines, r.cols)))
	start, col := 0, 0
	flush := func() bool {
		lines = append(lines, cells[start:len(cells):len(cells)])
		start, col = len(cells), 0
		return maxLines > 0 && len(lines) >= maxLines
	}
	for i, s := 0, text; i < len(s); {
		ch, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case ch == '\n':
			if flush() {
				return lines
			}
			continue
		case ch == '\t':
			n := tabWidth - col%tabWidth
			if col+n > r.cols {
				if flush() {
					return lines
				}
			} else {
				col += n
			}
			continue
		case ch == '\r' || ch == '\f' || ch < 0x20:
			ch = ' '
		}
		w := 1
		if wide(ch) {
			w = 2
		}
		if col+w > r.cols {
			if flush() {
				return lines
			}
		}
		f := r.faceFor(ch)
		if f < 0 {
			ch, f = '?', 0
		}
		if ch != ' ' {
			cells = append(cells, cell{r: ch, col: uint16(col), face: uint8(f)})
		}
		col += w
	}
	if len(cells) > start || len(lines) == 0 {
		lines = append(lines, cells[start:])
	}
	return lines
}

// layoutCap bounds the cells of maxLines lines of cols columns (no bound when maxLines is 0).
func layoutCap(maxLines, cols int) int {
	if maxLines <= 0 {
		return math.MaxInt
	}
	return maxLines * cols
}

func (r *Renderer) faceFor(ch rune) int {
	for i, f := range r.faces {
		if _, ok := f.chars[int(ch)]; ok {
			return i
		}
	}
	return -1
}

// drawLine draws runs of adjacent characters in the same font with one text operation each.
func (r *Renderer) drawLine(pdf *gopdf.GoPdf, line []cell, y float64) error {
	for i := 0; i < len(line); {
		j := i + 1
		for j < len(line) && line[j].face == line[i].face && line[j].col == line[j-1].col+1 && !wide(line[j-1].r) {
			j++
		}
		var sb strings.Builder
		for _, c := range line[i:j] {
			sb.WriteRune(c.r)
		}
		if err := pdf.SetFont(r.faces[line[i].face].family, "", fontSize); err != nil {
			return fmt.Errorf("render text: %w", err)
		}
		pdf.SetXY(margin+float64(line[i].col)*r.charW, y)
		if err := pdf.Cell(nil, sb.String()); err != nil {
			return fmt.Errorf("render text: %w", err)
		}
		i = j
	}
	return nil
}

// wide reports whether ch takes two columns in a monospace layout (East Asian wide and
// full-width characters).
func wide(ch rune) bool {
	return (ch >= 0x1100 && ch <= 0x115f) || (ch >= 0x2e80 && ch <= 0xa4cf && ch != 0x303f) ||
		(ch >= 0xac00 && ch <= 0xd7a3) || (ch >= 0xf900 && ch <= 0xfaff) || (ch >= 0xfe30 && ch <= 0xfe4f) ||
		(ch >= 0xff00 && ch <= 0xff60) || (ch >= 0xffe0 && ch <= 0xffe6) || (ch >= 0x20000 && ch <= 0x3fffd)
}
