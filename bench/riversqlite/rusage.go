package main

import (
	"syscall"
	"time"
)

// syscallRusage is the process's CPU time (user + system).
type syscallRusage struct{ cpu time.Duration }

func (r *syscallRusage) read() {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err == nil {
		r.cpu = time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
}

func (r syscallRusage) sub(o syscallRusage) time.Duration { return r.cpu - o.cpu }
