// SPDX-License-Identifier: MIT
// A Go program under shmclock-run -v / --strict (preload_escapes.py, issue
// 33): Go's runtime reads the counter (runtime.cputicks) and installs its
// own SIGSEGV handler, which must still turn a nil dereference into a
// panic the program recovers.
package main

import (
	"fmt"
	"time"
)

type t struct{ x int }

func nilDeref() (ok bool) {
	defer func() { ok = recover() != nil }()
	var p *t
	fmt.Println(p.x)
	return false
}

func main() {
	t0 := time.Now()
	time.Sleep(20 * time.Millisecond)
	done := make(chan bool)
	go func() { done <- nilDeref() }()
	fmt.Println("recovered", <-done)
	fmt.Println("advanced", time.Since(t0) > 0)
}
