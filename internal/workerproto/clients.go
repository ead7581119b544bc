package workerproto

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// RemoteClient is a remote worker as this server sees it: the requests of one token from one
// address with one User-Agent (`sluice worker --server` names its host and process id there).
type RemoteClient struct {
	// ID is "TOKEN_ID ADDRESS USER_AGENT".
	ID      string
	TokenID string
	Addr    string
	Agent   string
	// Actions are the actions it polled for, sorted.
	Actions []string
	// Polling is the number of its polls waiting for a task now.
	Polling int
	// InFlight is the number of tasks handed out to it and not finished.
	InFlight int
	// Seen is the time of its last request (a poll, or one about a task it holds).
	Seen time.Time
}

// clientForget is how long the server remembers a client it has not heard from.
const clientForget = time.Hour

type clientState struct {
	tokenID, addr, agent string
	actions              map[string]bool
	polling              int
	seen                 time.Time
}

// clientKey names the client of a request.
func clientKey(tokenID string, r *http.Request) (key, addr string) {
	addr = r.RemoteAddr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return tokenID + " " + addr + " " + r.UserAgent(), addr
}

// pollStarted records a poll of a client for an action; pollEnded must follow.
func (s *Server) pollStarted(tokenID string, r *http.Request, action string) string {
	key, addr := clientKey(tokenID, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[key]
	if c == nil {
		c = &clientState{tokenID: tokenID, addr: addr, agent: r.UserAgent(), actions: map[string]bool{}}
		s.clients[key] = c
	}
	c.actions[action] = true
	c.polling++
	c.seen = time.Now()
	return key
}

func (s *Server) pollEnded(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[key]; c != nil {
		c.polling--
		c.seen = time.Now()
	}
}

// Clients returns the remote workers this server has heard from in the last hour, by ID.
// Their tasks in flight and last contact include requests about the tasks they hold.
func (s *Server) Clients() []RemoteClient {
	s.mu.Lock()
	type use struct {
		n    int
		last time.Time
	}
	held := map[string]*use{}
	for _, ss := range s.byTask {
		u := held[ss.client]
		if u == nil {
			u = &use{}
			held[ss.client] = u
		}
		u.n++
		ss.mu.Lock()
		if ss.lastActive.After(u.last) {
			u.last = ss.lastActive
		}
		ss.mu.Unlock()
	}
	now := time.Now()
	var out []RemoteClient
	for key, c := range s.clients {
		u := held[key]
		if u == nil {
			u = &use{}
		}
		seen := c.seen
		if u.last.After(seen) {
			seen = u.last
		}
		if c.polling == 0 && u.n == 0 && now.Sub(seen) > clientForget {
			delete(s.clients, key)
			continue
		}
		rc := RemoteClient{ID: key, TokenID: c.tokenID, Addr: c.addr, Agent: c.agent, Polling: c.polling, InFlight: u.n, Seen: seen}
		for a := range c.actions {
			rc.Actions = append(rc.Actions, a)
		}
		slices.Sort(rc.Actions)
		out = append(out, rc)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b RemoteClient) int { return strings.Compare(a.ID, b.ID) })
	return out
}
