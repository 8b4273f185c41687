package main

import "io"

func bench(args []string, stdout, stderr io.Writer) int { return 2 }
