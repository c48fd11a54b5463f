//go:build !linux

package e2e

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func groupProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
