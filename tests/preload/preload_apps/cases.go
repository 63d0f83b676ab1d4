// SPDX-License-Identifier: MIT

// Go's timeouts, run under shmclock-run by tests/preload/preload_apps.py
// (issue 33). Built at test time twice: with cgo and external linking (net
// brings runtime/cgo in), a dynamic executable that loads the shim, whose
// runtime still reads the clock through the vDSO and waits with raw system
// calls (futex, epoll_pwait, nanosleep), which the shim has to catch; and
// with CGO_ENABLED=0, a static executable that runs under shmclock-run's
// supervisor.
//
//	cases CASE
//
// Prints "ready" just before one wait of 5 s that must time out, then
// "done M0 M1 OUTCOME": Go's monotonic clock (ns since the program's
// start) before and after, and "timeout" when the wait ended as one.
// Every case first checks that time.Now()'s wall clock agrees (within 2 s)
// with gettimeofday made as a raw system call, before and after: else
// OUTCOME is "clock-mismatch".
//
// Cases: sleep (time.Sleep), after (<-time.After), ctx
// (context.WithTimeout), ticker (a 100 Hz time.Ticker counted while a 5 s
// timer runs: "timeout" if 100..501 ticks came), http (an HTTP server with
// a 5 s ReadTimeout; a client connects and sends nothing: "timeout" when
// the server has closed the connection), exec (runs sleep 5 with an
// environment that has neither LD_PRELOAD nor the clock's name).
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

const wait = 5 * time.Second

var start = time.Now()

func mono() int64 { return int64(time.Since(start)) }

func clocksAgree() bool {
	var tv syscall.Timeval
	if _, _, e := syscall.RawSyscall(syscall.SYS_GETTIMEOFDAY, uintptr(unsafe.Pointer(&tv)), 0, 0); e != 0 {
		return false
	}
	d := time.Now().UnixNano() - tv.Nano()
	return d > -2e9 && d < 2e9
}

func ready() { fmt.Println("ready") }

func run(name string) string {
	switch name {
	case "sleep":
		ready()
		time.Sleep(wait)
		return "timeout"
	case "after":
		ready()
		<-time.After(wait)
		return "timeout"
	case "ctx":
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		ready()
		<-ctx.Done()
		if ctx.Err() == context.DeadlineExceeded {
			return "timeout"
		}
		return "no-timeout"
	case "ticker":
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		end := time.NewTimer(wait)
		n := 0
		ready()
		for {
			select {
			case <-t.C:
				n++
			case <-end.C:
				// 500 at 10 ms simulated; Go drops the ticks a
				// late receiver misses (a busy machine: the 5 s are
				// half a real second), so at least 100. A ticker on
				// real time gives 50 at scale 10; more than 501 are
				// ticks early.
				if n >= 100 && n <= 501 {
					return "timeout"
				}
				return fmt.Sprintf("ticks-%d", n)
			}
		}
	case "exec":
		// A child with an environment of its own (no LD_PRELOAD, no
		// clock name): it follows the clock all the same.
		cmd := exec.Command("sleep", "5")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		ready()
		if err := cmd.Run(); err != nil {
			return fmt.Sprintf("exec-%v", err)
		}
		return "timeout"
	case "http":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "listen-failed"
		}
		srv := &http.Server{ReadTimeout: wait, Handler: http.NotFoundHandler()}
		go srv.Serve(ln)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return "dial-failed"
		}
		ready()
		buf := make([]byte, 1)
		_, err = c.Read(buf)
		if err == io.EOF {
			return "timeout"
		}
		return fmt.Sprintf("read-%v", err)
	}
	fmt.Fprintf(os.Stderr, "cases: unknown case %q\n", name)
	os.Exit(2)
	return ""
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cases CASE")
		os.Exit(2)
	}
	agree := clocksAgree()
	m0 := mono()
	out := run(os.Args[1])
	m1 := mono()
	if !agree || !clocksAgree() {
		out = "clock-mismatch"
	}
	fmt.Printf("done %d %d %s\n", m0, m1, out)
}
