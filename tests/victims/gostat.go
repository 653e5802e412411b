// gostat N: os.Stat("/") N times through a helper the compiler inlines,
// as Go programs ship (built stripped by tests/callsites.rs).
package main

import (
	"fmt"
	"os"
	"strconv"
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	found := 0
	for i := 0; i < n; i++ {
		if exists("/") {
			found++
		}
	}
	fmt.Println(found)
}
