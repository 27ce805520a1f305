package bench

import "syscall"

// childProcAttr has the kernel stop the serve the memory scenario started when the
// bench dies without stopping it itself (killed, or a panic). The kernel ties this to
// the thread that started the child, which Go keeps as long as no goroutine locked to
// it exits; the scenario locks none.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
