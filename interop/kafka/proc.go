package kafka

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Usage is what /proc says of a process: the CPU time of all its
// threads and its memory. Benchmarks read it around a run of a broker
// (Broker.Pid, a partlog serve process) or a client (Tools.Pid, the
// test's own process) and take the difference of CPU.
type Usage struct {
	CPU     time.Duration // utime + stime of every thread, in clock ticks
	RSS     int64         // resident set now (VmRSS), bytes
	PeakRSS int64         // resident set's high-water mark (VmHWM), bytes
	AnonRSS int64         // resident anonymous memory (RssAnon): heaps, stacks
	FileRSS int64         // resident file pages mapped (RssFile): a partlog serve's segments count here
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on
// every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// ReadUsage reads the Usage of process pid (0: this process).
func ReadUsage(pid int) (Usage, error) {
	dir := procDir(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Usage{}, err
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return Usage{}, err
	}
	u, err := parseUsage(stat, status)
	if err != nil {
		return Usage{}, fmt.Errorf("%s: %w", dir, err)
	}
	return u, nil
}

// parseUsage reads a Usage from the contents of /proc/<pid>/stat and
// /proc/<pid>/status.
func parseUsage(stat, status []byte) (Usage, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the fields are counted from the last ')'.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return Usage{}, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(string(stat[end+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("stat: %d fields", len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("stat: utime %q, stime %q", f[11], f[12])
	}
	u := Usage{CPU: time.Duration(utime+stime) * clockTick}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &u.RSS
		case "VmHWM":
			dst = &u.PeakRSS
		case "RssAnon":
			dst = &u.AnonRSS
		case "RssFile":
			dst = &u.FileRSS
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("status: %s: %q", name, value)
		}
		*dst = kb << 10
	}
	return u, nil
}

// ResetPeakRSS sets process pid's (0: this process) resident high-water
// mark to its resident set now (clear_refs 5, Linux 4.0), so that
// the next ReadUsage's PeakRSS is the peak since this call.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(procDir(pid)+"/clear_refs", []byte("5"), 0)
}

func procDir(pid int) string {
	if pid == 0 {
		return "/proc/self"
	}
	return "/proc/" + strconv.Itoa(pid)
}
