package action

import (
	"fmt"
	"sort"
	"sync"
)

// Catalog is a set of actions by name. The zero value is empty and ready to use; it is safe for
// concurrent use.
type Catalog struct {
	mu      sync.RWMutex
	actions map[string]Action
	// specs holds each action's Spec, taken once at Register: a spec is a declaration, and the
	// engine asks for it on every step it makes ready.
	specs map[string]Spec
	// policies holds the policies of the actions registered with one (see [WithPolicy]).
	policies map[string]Policy
}

// Register adds actions, each under its [Policy]: the one given to [WithPolicy], or returned by
// the action's own Policy method, else the zero one. It panics on a duplicate or empty name: that is a wiring mistake.
func (c *Catalog) Register(as ...Action) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.actions == nil {
		c.actions = make(map[string]Action)
		c.specs = make(map[string]Spec)
		c.policies = make(map[string]Policy)
	}
	for _, a := range as {
		var policy Policy
		if w, ok := a.(withPolicy); ok {
			a, policy = w.Action, w.policy
		} else if p, ok := a.(interface{ Policy() Policy }); ok {
			policy = p.Policy()
		}
		spec := a.Spec()
		name := spec.Name
		if name == "" {
			panic("action: register an action with an empty name")
		}
		if _, dup := c.actions[name]; dup {
			panic(fmt.Sprintf("action: %q registered twice", name))
		}
		c.actions[name] = a
		c.specs[name] = spec
		c.policies[name] = policy
	}
}

// Policy returns the policy of the named action: the zero Policy for one registered without
// one, or not registered.
func (c *Catalog) Policy(name string) Policy {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.policies[name]
}

// Lookup returns the action with the given name.
func (c *Catalog) Lookup(name string) (Action, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	a, ok := c.actions[name]
	return a, ok
}

// Spec returns the spec of the named action; it satisfies workflow validation's lookup.
func (c *Catalog) Spec(name string) (Spec, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.specs[name]
	return s, ok
}

// Names returns the registered action names, sorted.
func (c *Catalog) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.actions))
	for n := range c.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
