package throttle

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeRecipesAreExamples: every Go block of the README stands, line
// for line (indentation aside), in a test file of the repository, an
// Example that runs in the test command; so the README cannot drift from
// the API. A README of the package's promised length: at most 450 lines.
func TestReadmeRecipesAreExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 450 {
		t.Errorf("README.md has %d lines; want at most 450 (reference goes to docs/ and package docs)", n)
	}
	var tests []string // the trimmed lines of every test file
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tests = append(tests, trimLines(string(b))...)
		tests = append(tests, "") // a block does not span files
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go block")
	}
	for _, b := range blocks {
		if !containsRun(tests, trimLines(b)) {
			t.Errorf("README.md's Go block is in no test file (write it as an Example):\n%s", b)
		}
	}
}

// goBlocks returns the bodies of the ```go blocks of md.
func goBlocks(md string) []string {
	var blocks []string
	for {
		i := strings.Index(md, "```go\n")
		if i < 0 {
			return blocks
		}
		md = md[i+len("```go\n"):]
		j := strings.Index(md, "```")
		if j < 0 {
			return blocks
		}
		blocks = append(blocks, md[:j])
		md = md[j+3:]
	}
}

// trimLines returns s's lines without their indentation, blank ones
// dropped.
func trimLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// containsRun reports whether run stands in lines as consecutive lines.
func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		ok := true
		for j := range run {
			if lines[i+j] != run[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
