// Package lint holds no code: its tests enforce the project's structural
// rules (the import graph of ARCHITECTURE.md, where unsafe may appear) as
// ordinary Go tests, so `go test ./...` fails when a rule is broken.
package lint
