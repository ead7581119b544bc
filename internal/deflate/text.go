package deflate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// PackText returns what a database column that keeps each value's type (SQLite's) stores of
// the text s: s itself, a string, unless deflating saves at least an eighth of it; then a
// []byte, the uvarint length of s followed by s deflated. [Text] reads either back, so a
// column may hold rows of both kinds — rows written before compression among them.
func PackText(s string) any {
	z, ok := Shrink([]byte(s))
	if !ok {
		return s
	}
	out := make([]byte, 0, binary.MaxVarintLen64+len(z))
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, z...)
}

// Text is a nullable text column that [PackText] wrote, as a [database/sql.Scanner]: a string
// value is the text, a []byte value is unpacked, and NULL leaves Valid false.
type Text struct {
	String string
	Valid  bool
}

// Scan implements [database/sql.Scanner].
func (t *Text) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*t = Text{}
	case string:
		*t = Text{String: v, Valid: true}
	case []byte:
		s, err := UnpackText(v)
		if err != nil {
			return err
		}
		*t = Text{String: s, Valid: true}
	default:
		return fmt.Errorf("packed text: unexpected %T", v)
	}
	return nil
}

// UnpackText returns the text that the []byte of [PackText] holds.
func UnpackText(b []byte) (string, error) {
	size, n := binary.Uvarint(b)
	if n <= 0 || size > math.MaxInt32 {
		return "", errors.New("packed text: bad length")
	}
	data, err := Inflate(b[n:], int64(size))
	if err != nil {
		return "", fmt.Errorf("packed text: %w", err)
	}
	return string(data), nil
}
