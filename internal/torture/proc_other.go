//go:build !linux

package torture

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
