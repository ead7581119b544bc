package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// readFileLimited reads at most max bytes of a file, failing with a clear error beyond.
func readFileLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) >= max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max-1)
	}
	return b, nil
}

// writeFileAtomic writes b to path via a temp file and a rename.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".sluice-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
