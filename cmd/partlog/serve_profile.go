package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
)

// profiler runs serve's hidden profiles, for measuring it under load
// (interop's BenchmarkBrokers): a CPU profile of the whole run
// (--cpuprofile), or of each window from SIGUSR1 to SIGUSR2
// (--profile-signals: a benchmark profiles its measurements and not its
// setup; each window's profile is written beside the path and renamed
// onto it when the window ends, so a reader never sees half of one), and
// the allocation profile at shutdown (--memprofile).
type profiler struct {
	cpu, mem string
	sigs     chan os.Signal // nil without --profile-signals
	done     chan struct{}
	mu       sync.Mutex
	f        *os.File // the CPU profile being written, nil between windows
}

func (o *serveOptions) startProfiles() (*profiler, error) {
	p := &profiler{cpu: o.cpuProfile, mem: o.memProfile}
	if p.cpu == "" {
		if o.profSignal {
			return nil, errors.New("--profile-signals needs --cpuprofile")
		}
		return p, nil
	}
	if !o.profSignal {
		return p, p.startCPU(p.cpu)
	}
	// Check the path can be written before the first window.
	if err := os.WriteFile(p.cpu+".tmp", nil, 0o644); err != nil {
		return nil, err
	}
	_ = os.Remove(p.cpu + ".tmp")
	p.sigs, p.done = make(chan os.Signal, 4), make(chan struct{})
	signal.Notify(p.sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	go p.windows()
	return p, nil
}

func (p *profiler) startCPU(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.mu.Lock()
	p.f = f
	p.mu.Unlock()
	return nil
}

// stopCPU ends the CPU profile being written, if any.
func (p *profiler) stopCPU() error {
	p.mu.Lock()
	f := p.f
	p.f = nil
	p.mu.Unlock()
	if f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	return f.Close()
}

// windows starts a window's profile on SIGUSR1 (a window already open
// goes on) and ends it on SIGUSR2.
func (p *profiler) windows() {
	defer close(p.done)
	for sig := range p.sigs {
		switch sig {
		case syscall.SIGUSR1:
			p.mu.Lock()
			open := p.f != nil
			p.mu.Unlock()
			if !open {
				_ = p.startCPU(p.cpu + ".tmp")
			}
		case syscall.SIGUSR2:
			p.endWindow()
		}
	}
}

func (p *profiler) endWindow() error {
	p.mu.Lock()
	open := p.f != nil
	p.mu.Unlock()
	if !open {
		return nil
	}
	if err := p.stopCPU(); err != nil {
		return err
	}
	return os.Rename(p.cpu+".tmp", p.cpu)
}

// end ends the profiles at shutdown: the CPU profile (or the open
// window) is written, then the allocation profile.
func (p *profiler) end(stderr io.Writer) {
	var err error
	if p.sigs != nil {
		signal.Stop(p.sigs)
		close(p.sigs)
		<-p.done
		err = p.endWindow()
	} else {
		err = p.stopCPU()
	}
	if err != nil {
		fmt.Fprintf(stderr, "serve: cpu profile: %v\n", err)
	}
	if p.mem != "" {
		f, err := os.Create(p.mem)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			fmt.Fprintf(stderr, "serve: allocation profile: %v\n", err)
		}
	}
}
