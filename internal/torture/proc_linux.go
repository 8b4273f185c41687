package torture

import "syscall"

// sysProcAttr has a node killed if the process that started it dies
// before it could clean up (a kill -9 of `shoal torture` or of its test).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
