//go:build !charts

package main

import "errors"

// chartsBuilt: -chart works in this build (extras.go).
const chartsBuilt = false

// writeChart is not reached: parseFlags refuses -chart in this build.
func writeChart(string, *Report) error { return errors.New("-chart: " + extraHint("charts")) }
