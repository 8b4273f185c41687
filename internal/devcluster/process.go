package devcluster

import (
	"io"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec is a node process to start.
type ProcessSpec struct {
	ID             string   // the node's id, for fakes and messages
	Args           []string // after the program's name, such as "serve"
	Dir            string   // working directory
	Env            []string // the whole environment, KEY=VALUE
	Stdout, Stderr io.Writer
}

// Exit is how a process ended.
type Exit struct {
	Code int    // its exit code; -1 when a signal ended it
	Text string // as os.ProcessState prints it: "exit status 1", "signal: killed"
}

// Process is a started node process.
type Process interface {
	Pid() int
	Terminate() error // asks it to stop (SIGTERM)
	Kill() error      // stops it now (SIGKILL)
	// Wait blocks until the process has ended and everything it printed has
	// reached Stdout and Stderr. The supervisor calls it once.
	Wait() Exit
}

// Starter starts node processes. The supervisor calls Start from its one
// goroutine.
type Starter interface {
	Start(ProcessSpec) (Process, error)
}

// ExecStarter runs `Exe Args...` with os/exec. Each node gets SIGTERM when
// the program that started it dies (even by SIGKILL) and runs in a process
// group of its own, so a Ctrl-C in the terminal reaches only `shoal dev`,
// which then stops the nodes itself.
//
// Linux sends that signal (Pdeathsig) when the thread that forked the child
// exits, and Go may end an idle thread, so every child is forked from one
// goroutine locked to its OS thread, which lives until Close.
type ExecStarter struct {
	exe    string
	spawns chan spawnRequest
	wg     sync.WaitGroup
}

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

// NewExecStarter starts the forking goroutine; Close ends it once no child
// is to be started any more.
func NewExecStarter(exe string) *ExecStarter {
	e := &ExecStarter{exe: exe, spawns: make(chan spawnRequest)}
	e.wg.Go(e.spawner)
	return e
}

func (e *ExecStarter) spawner() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for r := range e.spawns {
		r.result <- r.cmd.Start()
	}
}

// Close ends the forking goroutine and waits for it. Start must not be
// called after it.
func (e *ExecStarter) Close() {
	close(e.spawns)
	e.wg.Wait()
}

// Start starts the process on the forking goroutine.
func (e *ExecStarter) Start(spec ProcessSpec) (Process, error) {
	cmd := exec.Command(e.exe, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	result := make(chan error)
	e.spawns <- spawnRequest{cmd: cmd, result: result}
	if err := <-result; err != nil {
		return nil, err
	}
	return execProcess{cmd}, nil
}

type execProcess struct{ cmd *exec.Cmd }

func (p execProcess) Pid() int         { return p.cmd.Process.Pid }
func (p execProcess) Terminate() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
func (p execProcess) Kill() error      { return p.cmd.Process.Kill() }

func (p execProcess) Wait() Exit {
	p.cmd.Wait() // how it ended is in ProcessState; an error here is that or a pipe's
	ps := p.cmd.ProcessState
	if ps == nil {
		return Exit{Code: -1, Text: "still running"}
	}
	return Exit{Code: ps.ExitCode(), Text: ps.String()}
}
