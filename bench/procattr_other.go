//go:build !linux

package main

import "syscall"

// procAttr: only Linux stops a child when its parent dies; elsewhere a
// bench killed without stopping its children leaves them running.
func procAttr(syscall.Signal) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
