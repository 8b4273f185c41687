//go:build !unix

package main

import "time"

// selfCPU cannot read this process's CPU time here.
func selfCPU() (time.Duration, bool) { return 0, false }
