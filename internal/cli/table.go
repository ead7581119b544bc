package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// table is a listing printed in aligned columns, fitted to the terminal: when the rows are
// wider than it, its flexible columns (a description, an error) are cut with "…", one after the
// other, until every line fits. Printed to a pipe or a file, nothing is cut (unless $COLUMNS
// says a width).
type table struct {
	header []string
	rows   [][]string
	// flex are the columns cut to fit, the first first.
	flex []int
}

// newTable returns a table with the columns of header whose flexible columns are flex.
func newTable(flex []int, header ...string) *table { return &table{header: header, flex: flex} }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// width is the width to fit w's lines to: the terminal's, else $COLUMNS, else 0 (no limit).
func width(w io.Writer) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}

// minFlex is the least a flexible column is cut to, however narrow the terminal.
const minFlex = 12

// write prints the table to w, fitted to limit columns (0: no limit).
func (t *table) write(w io.Writer, limit int) error {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			if i < len(widths) {
				// A cell is one line: the first of a multi-line error.
				c, _, _ = strings.Cut(c, "\n")
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	const gap = 2
	if limit > 0 {
		total := (len(widths) - 1) * gap
		for _, n := range widths {
			total += n
		}
		for _, col := range t.flex {
			if over := total - limit; over > 0 && col < len(widths) {
				cut := min(over, max(widths[col]-minFlex, 0))
				widths[col] -= cut
				total -= cut
			}
		}
	}
	var b strings.Builder
	for _, r := range append([][]string{t.header}, t.rows...) {
		b.Reset()
		for i, c := range r {
			c, _, _ = strings.Cut(c, "\n")
			if i < len(widths) && utf8.RuneCountInString(c) > widths[i] {
				c = string([]rune(c)[:widths[i]-1]) + "…"
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+gap))
			}
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " ")); err != nil {
			return err
		}
	}
	return nil
}
