package main

import "io"

// commands are kgate's subcommands other than serve and version: each
// takes its arguments and writes its answer to out, its errors to errOut,
// and returns the exit status.
var commands = map[string]func(args []string, out, errOut io.Writer) int{}
