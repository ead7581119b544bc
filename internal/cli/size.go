package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of a number of bytes: plain ("1048576") or with a binary unit ("10GiB",
// "512MiB", "64KiB"; "GB", "MB" and "KB" are read as the binary units too).
type byteSize int64

// String writes the size with the largest binary unit that divides it ("10GiB"), as Set reads it.
func (b byteSize) String() string {
	n := int64(b)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	v := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffixes []string
		shift    uint
	}{{[]string{"TiB", "TB", "T"}, 40}, {[]string{"GiB", "GB", "G"}, 30}, {[]string{"MiB", "MB", "M"}, 20}, {[]string{"KiB", "KB", "K"}, 10}, {[]string{"B"}, 0}} {
		found := false
		for _, suf := range u.suffixes {
			if len(v) > len(suf) && strings.EqualFold(v[len(v)-len(suf):], suf) {
				v, mult, found = strings.TrimSpace(v[:len(v)-len(suf)]), 1<<u.shift, true
				break
			}
		}
		if found {
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a positive size such as 10GiB or 512MiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}
