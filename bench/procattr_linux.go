package main

import "syscall"

// procAttr has the kernel send a child deathSig when the bench dies.
func procAttr(deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: deathSig}
}
