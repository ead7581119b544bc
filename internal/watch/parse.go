package watch

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// IsURL reports whether a source URL names a watched location: file:///DIR or
// s3://bucket/prefix.
func IsURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "file" || u.Scheme == "s3")
}

// Parse parses the URL of a source that watches a location, as `sluice serve --source` takes
// it, into the settings of a [Config] (its Engine, stores and Bucket are the caller's):
//
//	file:///DIR?workflow=W[&settle=2s][&poll=1s][&done-dir=DIR | &move-done=true]
//	s3://BUCKET/PREFIX?workflow=W[&settle=2s][&poll=1s][&move-done=true][&tag-done=true][&rescan=10m]
//
// An s3:// location's endpoint, region and keys come from the AWS_* variables, as for --blobs.
func Parse(name, raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("source %s: %w", name, err)
	}
	q := u.Query()
	c := Config{Name: name, Workflow: q.Get("workflow"), DoneDir: q.Get("done-dir")}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Config{}, fmt.Errorf("source %s: file://%s: a watched folder is on this machine (file:///path)", name, u.Host)
		}
		c.Location = u.Path
	case "s3":
		c.Location = (&url.URL{Scheme: "s3", Host: u.Host, Path: u.Path}).String()
	default:
		return Config{}, fmt.Errorf("source %s: unknown scheme %q (file, s3)", name, u.Scheme)
	}
	if c.Workflow == "" {
		return Config{}, fmt.Errorf("source %s: no workflow= (the workflow of its jobs)", name)
	}
	for _, d := range []struct {
		key string
		to  *time.Duration
	}{{"settle", &c.Settle}, {"poll", &c.Poll}, {"rescan", &c.Rescan}} {
		if v := q.Get(d.key); v != "" {
			if *d.to, err = time.ParseDuration(v); err != nil || *d.to < 0 {
				return Config{}, fmt.Errorf("source %s: %s=%q: want a duration such as 2s", name, d.key, v)
			}
			if *d.to == 0 && d.key == "settle" {
				c.Settle = -1 // zero: take a file at first sight
			}
		}
	}
	for _, b := range []struct {
		key string
		to  *bool
	}{{"move-done", &c.MoveDone}, {"tag-done", &c.TagDone}} {
		if v := q.Get(b.key); v != "" {
			if *b.to, err = strconv.ParseBool(v); err != nil {
				return Config{}, fmt.Errorf("source %s: %s=%q: want true or false", name, b.key, v)
			}
		}
	}
	return c, nil
}
