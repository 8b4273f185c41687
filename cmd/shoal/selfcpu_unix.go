//go:build unix

package main

import (
	"syscall"
	"time"
)

// selfCPU is the CPU time this process has used so far (user and
// system), and whether it could be read.
func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
