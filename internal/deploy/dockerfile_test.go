package deploy

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int    // where it starts, 1-based
	cmd  string // upper case: FROM, RUN, COPY...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	base, name string
	instrs     []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// parseDockerfile reads the instructions of a Dockerfile: comment lines (and
// parser directives) are skipped, also inside continued instructions, and a
// line ending in a backslash continues on the next.
func parseDockerfile(t *testing.T, text string) []stage {
	t.Helper()
	var (
		stages []stage
		cur    strings.Builder
		start  int
	)
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		cmd, args, _ := strings.Cut(s, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			var st stage
			for _, w := range f {
				if !strings.HasPrefix(w, "--") {
					st.base = w
					break
				}
			}
			if len(f) >= 3 && strings.EqualFold(f[len(f)-2], "AS") {
				st.name = f[len(f)-1]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
			}
			return
		}
		st := &stages[len(stages)-1]
		st.instrs = append(st.instrs, in)
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			if trimmed == "" {
				continue
			}
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func readDockerfile(t *testing.T) []stage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(data))
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	return stages
}

// buildStage is the stage the runtime stage copies the binary from, with the
// one `go build` RUN line of the whole file.
func buildStage(t *testing.T, stages []stage) (stage, instruction) {
	t.Helper()
	var builds []instruction
	var in stage
	for _, s := range stages {
		for _, r := range s.all("RUN") {
			if strings.Contains(r.args, "go build") {
				builds = append(builds, r)
				in = s
			}
		}
	}
	if len(builds) != 1 {
		t.Fatalf("the Dockerfile has %d RUN lines with `go build`, want exactly one", len(builds))
	}
	return in, builds[0]
}

var outFlag = regexp.MustCompile(`(^|\s)-o\s+(\S+)`)

func TestDockerfileBuildStage(t *testing.T) {
	stages := readDockerfile(t)
	st, build := buildStage(t, stages)
	if st.name == "" {
		t.Errorf("the build stage (FROM %s) has no name to copy from", st.base)
	}
	// The image's Go must be the go.mod's Go (golang images set GOTOOLCHAIN=local).
	gomod, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	goMinor := string(m[1])
	if !regexp.MustCompile(`^golang:` + regexp.QuoteMeta(goMinor) + `(\.\d+)?(-[a-z0-9]+)?$`).MatchString(st.base) {
		t.Errorf("the build stage is FROM %s, want golang:%s (go.mod says go %s)", st.base, goMinor, goMinor)
	}
	// Order: go.mod and go.sum, go mod download, the source, then the build.
	idx := func(pred func(instruction) bool) int {
		return slices.IndexFunc(st.instrs, pred)
	}
	copyMod := idx(func(in instruction) bool {
		return in.cmd == "COPY" && strings.Contains(in.args, "go.mod") && strings.Contains(in.args, "go.sum") && !strings.Contains(in.args, " . ")
	})
	download := idx(func(in instruction) bool { return in.cmd == "RUN" && strings.Contains(in.args, "go mod download") })
	copyAll := idx(func(in instruction) bool {
		return in.cmd == "COPY" && strings.Join(strings.Fields(in.args), " ") == ". ."
	})
	arg := idx(func(in instruction) bool { return in.cmd == "ARG" && strings.HasPrefix(in.args, "VERSION") })
	buildAt := idx(func(in instruction) bool { return in == build })
	if copyMod < 0 || download < 0 || copyAll < 0 || !(copyMod < download && download < copyAll && copyAll < buildAt) {
		t.Errorf("the build stage must COPY go.mod go.sum, RUN go mod download, COPY . ., then build (positions %d, %d, %d, %d)", copyMod, download, copyAll, buildAt)
	}
	if arg < 0 || arg > buildAt {
		t.Error("the build stage must declare ARG VERSION before the build")
	} else if st.instrs[arg].args != "VERSION=dev" {
		t.Errorf("the build stage has ARG %s, want ARG VERSION=dev", st.instrs[arg].args)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "main.version=${VERSION}", "./cmd/shoal"} {
		if !strings.Contains(build.args, want) {
			t.Errorf("the build line %q lacks %s", build.args, want)
		}
	}
	// The runtime stage copies exactly what the build wrote.
	out := outFlag.FindStringSubmatch(build.args)
	if out == nil {
		t.Fatalf("the build line %q has no -o", build.args)
	}
	final := stages[len(stages)-1]
	want := "--from=" + st.name + " " + out[2] + " /usr/local/bin/shoal"
	found := false
	for _, c := range final.all("COPY") {
		found = found || strings.Join(strings.Fields(c.args), " ") == want
	}
	if !found {
		t.Errorf("the runtime stage does not COPY %s", want)
	}
}

func TestDockerfileRuntimeStage(t *testing.T) {
	stages := readDockerfile(t)
	final := stages[len(stages)-1]
	users := final.all("USER")
	nonroot := strings.HasSuffix(final.base, ":nonroot") || strings.Contains(final.base, ":nonroot-")
	if len(users) > 0 {
		u, _, _ := strings.Cut(users[len(users)-1].args, ":")
		nonroot = u != "root" && u != "0"
	}
	if !nonroot {
		t.Errorf("the runtime stage (FROM %s) runs as root: use a nonroot base or USER", final.base)
	}
	if strings.HasPrefix(final.base, "golang") {
		t.Errorf("the runtime stage is FROM %s: it should be a small image, not the toolchain", final.base)
	}
	hc := final.all("HEALTHCHECK")
	if len(hc) != 1 {
		t.Fatalf("the runtime stage has %d HEALTHCHECKs, want one", len(hc))
	}
	_, cmd, ok := strings.Cut(hc[0].args, "CMD ")
	if !ok || !slices.Equal(execForm(t, "HEALTHCHECK CMD", cmd), []string{"shoal", "health"}) {
		t.Errorf("HEALTHCHECK %q, want CMD [\"shoal\", \"health\"] (the image has no shell or curl)", hc[0].args)
	}
	last := func(cmd string) []string {
		ins := final.all(cmd)
		if len(ins) == 0 {
			t.Errorf("the runtime stage has no %s", cmd)
			return nil
		}
		return execForm(t, cmd, ins[len(ins)-1].args)
	}
	if got := last("ENTRYPOINT"); got != nil && !slices.Equal(got, []string{"shoal"}) {
		t.Errorf("ENTRYPOINT %q, want [\"shoal\"]", got)
	}
	if got := last("CMD"); got != nil && !slices.Equal(got, []string{"serve"}) {
		t.Errorf("CMD %q, want [\"serve\"]", got)
	}
	var exposed []string
	for _, e := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(e.args)...)
	}
	for _, want := range []string{"8080", "7946/tcp", "7946/udp"} {
		if !slices.Contains(exposed, want) {
			t.Errorf("the runtime stage exposes %v, missing %s", exposed, want)
		}
	}
}

// execForm parses a JSON (exec form) argument list: the distroless image
// has no shell for the shell form.
func execForm(t *testing.T, what, args string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(args)), &out); err != nil {
		t.Errorf("%s %s is not in exec form [\"...\"]: %v", what, args, err)
		return nil
	}
	return out
}

// TestDockerfileBuildLineBuilds runs the Dockerfile's own build command, as
// the image build would (VERSION=test, no .git in the context), with only its
// -o moved to a temporary directory, and checks the binary is static and
// reports the version it was given.
func TestDockerfileBuildLineBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	_, build := buildStage(t, readDockerfile(t))
	out := outFlag.FindStringSubmatch(build.args)
	if out == nil {
		t.Fatalf("the build line %q has no -o", build.args)
	}
	bin := filepath.Join(t.TempDir(), "shoal")
	line := outFlag.ReplaceAllLiteralString(build.args, out[1]+"-o '"+bin+"'")
	if strings.Contains(line, out[2]) {
		t.Fatalf("the build line %q writes %s in more than one place", build.args, out[2])
	}
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "VERSION=test", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build line failed: %s\n%v\n%s", line, err, b)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the build wrote no executable at %s: %v", bin, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; the distroless static image has no C library")
		}
	}
	f.Close()
	var stdout bytes.Buffer
	v := exec.Command(bin, "version")
	v.Stdout = &stdout
	if err := v.Run(); err != nil {
		t.Fatalf("shoal version: %v", err)
	}
	if got := strings.TrimSpace(stdout.String()); got != "shoal test" {
		t.Errorf("shoal version printed %q, want \"shoal test\": the -X main.version of the build line does not reach the binary", got)
	}
}

func TestDockerignoreKeepsSecretsAndDataOut(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		patterns = append(patterns, strings.Trim(filepath.Clean(line), "/"))
	}
	ignored := func(path string) bool {
		for _, p := range patterns {
			for q := path; q != "." && q != "/"; q = filepath.Dir(q) {
				if ok, _ := filepath.Match(p, q); ok {
					return true
				}
			}
		}
		return false
	}
	for _, p := range []string{".git", ".env", "data", ".shoal-dev", "data/p0001.sqlite", ".git/config"} {
		if !ignored(p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd/shoal/main.go", "internal/config/config.go", "store", "api/server.go"} {
		if ignored(p) {
			t.Errorf(".dockerignore keeps %s, which the build needs, out of the context", p)
		}
	}
}
