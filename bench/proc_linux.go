package bench

import "syscall"

// childProcAttr has the kernel stop the serve the memory scenario started when the
// bench dies without stopping it itself (killed, or a panic).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
