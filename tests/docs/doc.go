// Package docs holds a test that compiles the Go blocks of README.md and
// docs/*.md marked as a program (package main) or a function (a top-level
// func), so that what the docs show cannot rot. Fragments stay unchecked.
package docs
