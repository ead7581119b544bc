package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/sluice-project/sluice/internal/workerproto"
)

// Role is what a token may do.
type Role string

// The roles of a token.
const (
	RoleAdmin  Role = "admin"  // everything
	RoleReader Role = "reader" // read-only API endpoints
	RoleWorker Role = "worker" // the worker protocol only
)

// ValidRole reports whether r is a known role.
func ValidRole(r Role) bool { return r == RoleAdmin || r == RoleReader || r == RoleWorker }

// Token is a stored token: never its plaintext, only its SHA-256.
type Token struct {
	ID string `json:"id"`
	// Name says whose token it is ("ci", "alice"): the audit log records it as who did what.
	// Empty for a token created without one.
	Name      string    `json:"name,omitempty"`
	Role      Role      `json:"role"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// TokenStore keeps API tokens hashed in a JSON file (tokens.json, mode 0600, under the data dir).
// It is safe for concurrent use within one process; `sluice token create` and a running server
// share the file, and the server re-reads it when it changes.
type TokenStore struct {
	path string

	mu     sync.Mutex
	mod    time.Time
	size   int64
	tokens []Token
}

// OpenTokenStore opens (or starts) the token file at path, usually <data dir>/tokens.json.
func OpenTokenStore(path string) (*TokenStore, error) {
	ts := &TokenStore{path: path}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.reload(); err != nil {
		return nil, err
	}
	return ts, nil
}

func (ts *TokenStore) reload() error {
	fi, err := os.Stat(ts.path)
	if errors.Is(err, os.ErrNotExist) {
		ts.tokens = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	if fi.ModTime().Equal(ts.mod) && fi.Size() == ts.size {
		return nil
	}
	b, err := os.ReadFile(ts.path)
	if err != nil {
		return fmt.Errorf("read tokens: %w", err)
	}
	var toks []Token
	if err := json.Unmarshal(b, &toks); err != nil {
		return fmt.Errorf("read tokens %s: %w", ts.path, err)
	}
	ts.tokens, ts.mod, ts.size = toks, fi.ModTime(), fi.Size()
	return nil
}

// Create makes a token with the role and no name and returns its plaintext, shown once.
func (ts *TokenStore) Create(role Role) (string, error) { return ts.CreateNamed(role, "") }

// maxTokenName bounds a token's name.
const maxTokenName = 64

// CreateNamed makes a token with the role and the name, and returns its plaintext, shown once.
// A name is at most 64 printable characters.
func (ts *TokenStore) CreateNamed(role Role, name string) (string, error) {
	if !ValidRole(role) {
		return "", fmt.Errorf("unknown role %q: want admin, reader or worker", role)
	}
	if len(name) > maxTokenName || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return "", fmt.Errorf("token name %q: want at most %d printable characters", name, maxTokenName)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	plain := "sl_" + hex.EncodeToString(b)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.reload(); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(plain))
	tok := Token{ID: hex.EncodeToString(sum[:4]), Name: name, Role: role, SHA256: hex.EncodeToString(sum[:]), CreatedAt: time.Now().UTC()}
	toks := append(append([]Token{}, ts.tokens...), tok)
	if err := ts.write(toks); err != nil {
		return "", err
	}
	return plain, nil
}

// List returns the stored tokens (hashes only).
func (ts *TokenStore) List() ([]Token, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.reload(); err != nil {
		return nil, err
	}
	return append([]Token{}, ts.tokens...), nil
}

// Revoke deletes the token with the id; false when there was none.
func (ts *TokenStore) Revoke(id string) (bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.reload(); err != nil {
		return false, err
	}
	var keep []Token
	for _, t := range ts.tokens {
		if t.ID != id {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(ts.tokens) {
		return false, nil
	}
	return true, ts.write(keep)
}

// write replaces the file atomically (temp file, fsync, rename).
func (ts *TokenStore) write(toks []Token) error {
	b, err := json.MarshalIndent(toks, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(ts.path), 0o700); err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(ts.path), ".tokens-*")
	if err != nil {
		return fmt.Errorf("write tokens: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err == nil {
		if _, err = f.Write(b); err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), ts.path)
		}
		if err != nil {
			return fmt.Errorf("write tokens: %w", err)
		}
	} else {
		f.Close()
		return fmt.Errorf("write tokens: %w", err)
	}
	ts.tokens = toks
	if fi, err := os.Stat(ts.path); err == nil {
		ts.mod, ts.size = fi.ModTime(), fi.Size()
	}
	return nil
}

// Lookup returns the token whose plaintext is given.
func (ts *TokenStore) Lookup(plain string) (Token, bool) {
	if plain == "" {
		return Token{}, false
	}
	sum := sha256.Sum256([]byte(plain))
	h := hex.EncodeToString(sum[:])
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_ = ts.reload() // keep the last good list on a read error
	for _, t := range ts.tokens {
		if subtle.ConstantTimeCompare([]byte(t.SHA256), []byte(h)) == 1 {
			return t, true
		}
	}
	return Token{}, false
}

// Who names the token in the audit log: its name, or "token ID" without one.
func (t Token) Who() string {
	if t.Name != "" {
		return t.Name
	}
	return "token " + t.ID
}

// Check returns the role of a plaintext token.
func (ts *TokenStore) Check(plain string) (Role, bool) {
	t, ok := ts.Lookup(plain)
	return t.Role, ok
}

// WorkerAuth returns the check for poll URLs: worker and admin tokens may serve workers.
func (ts *TokenStore) WorkerAuth() workerproto.Auth {
	return func(plain string) (string, error) {
		if plain == "" {
			return "", workerproto.ErrNoToken
		}
		t, ok := ts.Lookup(plain)
		switch {
		case !ok:
			return "", workerproto.ErrBadToken
		case t.Role != RoleWorker && t.Role != RoleAdmin:
			return "", workerproto.ErrForbidden
		}
		return t.ID, nil
	}
}
