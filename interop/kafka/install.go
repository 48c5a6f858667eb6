package kafka

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Version is the Apache Kafka release the harness runs (pom.xml pins it).
const Version = "4.4.0"

//go:embed pom.xml
var pom []byte

// Install is a Kafka classpath on this machine and the java that runs it.
type Install struct {
	Lib  string // directory of jars: the broker, its tools, the client
	Java string // java executable
	// classes holds the compiled helpers of java/ (ToolRunner and the
	// client programs), built on first use.
	classesOnce sync.Once
	classes     string
	classesErr  error
}

// Classpath is the JVM classpath of Lib's jars (and the compiled helpers
// once built).
func (in *Install) Classpath() string {
	cp := filepath.Join(in.Lib, "*")
	if in.classes != "" {
		cp = in.classes + string(os.PathListSeparator) + cp
	}
	return cp
}

// Env names of the harness.
const (
	// EnvLib points at a directory holding the jars (skips Maven).
	EnvLib = "PARTLOG_KAFKA_LIB"
	// EnvRequire=1 makes a test that needs Kafka fail, not skip, when
	// Kafka cannot be found, fetched or started (.ci/run sets it).
	EnvRequire = "PARTLOG_INTEROP_REQUIRE_KAFKA"
)

var (
	locateOnce sync.Once
	located    *Install
	locateErr  error
)

// Locate finds the pinned Kafka jars: $PARTLOG_KAFKA_LIB, else the user
// cache (fetched there with Maven on first use, keyed by pom.xml's hash
// so a change of pins fetches again). It fails when neither works.
func Locate() (*Install, error) {
	locateOnce.Do(func() { located, locateErr = locate() })
	return located, locateErr
}

func locate() (*Install, error) {
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	if lib := os.Getenv(EnvLib); lib != "" {
		if err := checkLib(lib); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvLib, lib, err)
		}
		return &Install{Lib: lib, Java: java}, nil
	}
	lib, err := CacheDir()
	if err != nil {
		return nil, err
	}
	if checkLib(lib) == nil {
		return &Install{Lib: lib, Java: java}, nil
	}
	if err := Fetch(lib); err != nil {
		return nil, err
	}
	return &Install{Lib: lib, Java: java}, nil
}

// CacheDir is where Locate keeps the jars when $PARTLOG_KAFKA_LIB is not
// set: $XDG_CACHE_HOME (or ~/.cache)/partlog/kafka-<version>-<pom hash>.
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the Kafka jars (set %s): %w", EnvLib, err)
	}
	sum := sha256.Sum256(pom)
	return filepath.Join(base, "partlog", "kafka-"+Version+"-"+hex.EncodeToString(sum[:4])), nil
}

// Fetch copies the pinned jars into dir with Maven. It writes them into
// a sibling temporary directory and renames it into place, so a fetch
// cut short never leaves a half-filled dir that checkLib would accept.
func Fetch(dir string) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("the Kafka %s jars are not cached in %s and Maven is not installed to fetch them (or set %s): %w", Version, dir, EnvLib, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pomPath := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return err
	}
	jars := filepath.Join(tmp, "lib")
	cmd := exec.Command(mvn, "-q", "-B", "-f", pomPath, "dependency:copy-dependencies", "-DoutputDirectory="+jars)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("fetching the Kafka %s jars with Maven: %w\n%s", Version, err, out.String())
	}
	if err := checkLib(jars); err != nil {
		return fmt.Errorf("Maven fetched an incomplete Kafka classpath: %w", err)
	}
	if err := os.Rename(jars, dir); err != nil && !errors.Is(err, os.ErrExist) && checkLib(dir) != nil {
		return err
	}
	return nil
}

// checkLib reports whether lib holds the jars the harness runs.
func checkLib(lib string) error {
	for _, j := range []string{"kafka_2.13-" + Version + ".jar", "kafka-tools-" + Version + ".jar", "kafka-clients-" + Version + ".jar"} {
		if _, err := os.Stat(filepath.Join(lib, j)); err != nil {
			return fmt.Errorf("%s missing", j)
		}
	}
	return nil
}

// javaPath is $JAVA_HOME/bin/java, else java on PATH.
func javaPath() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		p := filepath.Join(h, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java not found (Kafka %s needs Java 17 or later): %w", Version, err)
	}
	return p, nil
}

// Required reports whether tests must fail, not skip, without Kafka.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Need returns the Kafka install for a test, or ends the test: it fails
// when $PARTLOG_INTEROP_REQUIRE_KAFKA=1 (CI), and otherwise skips with
// the reason.
func Need(t testing.TB) *Install {
	t.Helper()
	in, err := Locate()
	if err != nil {
		Unavailable(t, err)
	}
	return in
}

// Unavailable ends a test that cannot run without Kafka: it fails under
// $PARTLOG_INTEROP_REQUIRE_KAFKA=1 and skips otherwise.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("Kafka %s is required (%s=1) but unavailable: %v", Version, EnvRequire, err)
	}
	t.Skipf("Kafka %s unavailable (set %s=1 to fail instead): %v", Version, EnvRequire, err)
}

//go:embed java/*.java
var javaSources embed.FS

// Helpers compiles the Java programs of java/ (once per process, into
// the cache beside the jars, keyed by their hash) and returns the
// directory of their classes, which Classpath then includes.
func (in *Install) Helpers() (string, error) {
	in.classesOnce.Do(func() { in.classes, in.classesErr = in.compileHelpers() })
	return in.classes, in.classesErr
}

func (in *Install) compileHelpers() (string, error) {
	entries, err := javaSources.ReadDir("java")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(in.Lib))
	var names []string
	for _, e := range entries {
		b, err := javaSources.ReadFile("java/" + e.Name())
		if err != nil {
			return "", err
		}
		h.Write([]byte(e.Name()))
		h.Write(b)
		names = append(names, e.Name())
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	out := filepath.Join(base, "partlog", "kafka-helpers-"+hex.EncodeToString(h.Sum(nil)[:6]))
	if _, err := os.Stat(filepath.Join(out, ".complete")); err == nil {
		return out, nil
	}
	javac, err := javacPath(in.Java)
	if err != nil {
		return "", err
	}
	src, err := os.MkdirTemp("", "partlog-java-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	var paths []string
	for _, n := range names {
		b, _ := javaSources.ReadFile("java/" + n)
		p := filepath.Join(src, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
		paths = append(paths, p)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".classes-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(out), ".classes-"); err != nil {
			return "", err
		}
	}
	args := append([]string{"-nowarn", "-encoding", "UTF-8", "-cp", filepath.Join(in.Lib, "*"), "-d", tmp}, paths...)
	cmd := exec.Command(javac, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("compiling the Java helpers: %w\n%s", err, buf.String())
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(out, ".complete")); serr != nil {
			return "", err
		}
	}
	return out, nil
}

// javacPath is the javac beside java.
func javacPath(java string) (string, error) {
	if real, err := filepath.EvalSymlinks(java); err == nil {
		p := filepath.Join(filepath.Dir(real), "javac")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("javac")
	if err != nil {
		return "", fmt.Errorf("javac not found beside %s: %w", java, err)
	}
	return p, nil
}

// quoteArgs renders a command line for error messages.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
