package lab

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr puts each master in its own process group (so a kill reaches
// any child it forks for a rewrite) and has the kernel SIGKILL it if the
// thread that started it dies, so a crashed test binary leaves no master
// behind. Go does not retire OS threads unless a goroutine exits while
// locked to one, which the lab never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// waitStopped returns once /proc shows pid stopped, so Pause has taken effect
// when it returns rather than when the signal happens to be delivered.
func waitStopped(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("lab: pause pid %d: %w", pid, err)
		}
		// Field 3, after the parenthesised command name, is the state.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: pause pid %d: not stopped after 1s", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
