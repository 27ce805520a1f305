//go:build !linux

package bench

import "syscall"

// childProcAttr: only Linux can stop a child when its parent dies, and only Linux
// runs the memory scenario.
func childProcAttr() *syscall.SysProcAttr { return nil }
