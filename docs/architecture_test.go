package docs

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/opentreasury/treasury/"

// ourImports is every package of the module (examples aside) with the module's packages
// it imports, tests aside, as go list reports them.
func ourImports(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pattern)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		name := strings.TrimPrefix(fields[0], module)
		if strings.HasPrefix(name, "examples/") {
			continue
		}
		var ours []string
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				ours = append(ours, strings.TrimPrefix(imp, module))
			}
		}
		slices.Sort(ours)
		pkgs[name] = ours
	}
	return pkgs
}

var backticked = regexp.MustCompile("`([^`]+)`")

// TestArchitectureTableMatchesTheImports holds the dependency tables of architecture.md
// (rows of | `package` | its job | `imports`, … |) against the packages as built: every
// package is listed once, with exactly the packages of ours it imports.
func TestArchitectureTableMatchesTheImports(t *testing.T) {
	f, err := os.Open("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string][]string{}
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| package | its job | imports (of ours) |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("architecture.md: a row of three cells expected: %q", line)
		}
		names := backticked.FindAllStringSubmatch(cells[0], -1)
		if len(names) != 1 {
			t.Fatalf("architecture.md: one package per row: %q", line)
		}
		var imports []string
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			imports = append(imports, m[1])
		}
		slices.Sort(imports)
		name := names[0][1]
		if _, dup := documented[name]; dup {
			t.Errorf("architecture.md lists %s twice", name)
		}
		documented[name] = imports
	}
	if len(documented) == 0 {
		t.Fatal("architecture.md has no dependency table")
	}
	built := ourImports(t, "./...")
	for name, imports := range built {
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("architecture.md does not list %s (it imports %v)", name, imports)
		case !slices.Equal(doc, imports):
			t.Errorf("architecture.md says %s imports %v; it imports %v", name, doc, imports)
		}
	}
	for name := range documented {
		if _, ok := built[name]; !ok {
			t.Errorf("architecture.md lists %s, which is not a package", name)
		}
	}
}

// TestTheProductionBinaryLinksNoDevelopmentSupport: nothing under dev/ (the dev bundle, the
// seed, the cluster launcher, the dev signer, test and bench support) reaches treasury.
func TestTheProductionBinaryLinksNoDevelopmentSupport(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/treasury")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"internal/assemble") {
		t.Fatalf("go list -deps ./cmd/treasury does not name the packages: %v", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, module+"dev/") || strings.HasPrefix(d, "go.temporal.io/server") {
			t.Errorf("treasury links %s", d)
		}
	}
}

// TestNoFunctionThatAssemblesAProcessIsLong: the places that put a process together (the
// composition root, the dev bundle, the cluster launcher, the binaries, the bench rigs
// and the router) read as lists of parts, each function a screen at most.
func TestNoFunctionThatAssemblesAProcessIsLong(t *testing.T) {
	const most = 80
	// Reading the environment into a Config (internal/assemble/config.go) is not assembling.
	patterns := []string{"internal/assemble/*.go", "api/router.go", "cmd/treasury/*.go",
		"cmd/treasury-dev/*.go", "dev/devstack/*.go", "dev/cluster/*.go", "dev/bench/httpcost/*.go",
		"dev/bench/ceiling/*.go", "dev/bench/webhooks/*.go"}
	fset := token.NewFileSet()
	for _, pattern := range patterns {
		files, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pattern, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, filepath.Join("assemble", "config.go")) {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > most {
					t.Errorf("%s: %s is %d lines (at most %d)", name, fn.Name.Name, n, most)
				}
			}
		}
	}
}

// TestWhereThingsLiveNamesWhatExists holds the "Where things live" table to the tree: every
// file or package path it names exists, and every pkg.Name (pkg.Type.Method) it names is
// declared in that package, so that a rename or a move that forgets the table fails here.
func TestWhereThingsLiveNamesWhatExists(t *testing.T) {
	text, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	section := strings.SplitN(strings.SplitN(string(text), "## Where things live", 2)[1], "\n## ", 2)[0]
	dirs := ourImports(t, "./...")
	qualified := regexp.MustCompile(`^([a-z]+)\.([A-Z]\w*)(?:\.([A-Z]\w*))?$`)
	rows, names := 0, 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| question") {
			continue
		}
		rows++
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			name := m[1]
			switch q := qualified.FindStringSubmatch(name); {
			case q != nil:
				names++
				if !declaredIn(t, dirs, q[1], q[2], q[3]) {
					t.Errorf("%s is not declared in a package named %s", name, q[1])
				}
			case strings.Contains(name, "/") && !strings.ContainsAny(name, " {<") && !strings.HasPrefix(name, "/"):
				names++
				if _, err := os.Stat(filepath.Join("..", name)); err != nil {
					t.Errorf("%s does not exist", name)
				}
			}
		}
	}
	if rows < 20 || names < 40 {
		t.Fatalf("read %d rows naming %d things: the table was not found", rows, names)
	}
}

// declaredIn reports whether a package of ours whose last path element is pkg declares
// name at its top level (a function, type, variable or constant) or as a method, or,
// with method, a type name with that method.
func declaredIn(t *testing.T, pkgs map[string][]string, pkg, name, method string) bool {
	t.Helper()
	for dir := range pkgs {
		if filepath.Base(dir) != pkg {
			continue
		}
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		declared := map[string]bool{}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					key := d.Name.Name
					if d.Recv != nil && len(d.Recv.List) == 1 {
						recv := d.Recv.List[0].Type
						if star, ok := recv.(*ast.StarExpr); ok {
							recv = star.X
						}
						if id, ok := recv.(*ast.Ident); ok {
							key = id.Name + "." + key
						}
						// The table names a method of the package's own type
						// (service.Service, store.Store) by the package alone.
						declared["."+d.Name.Name] = true
					}
					declared[key] = true
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch spec := spec.(type) {
						case *ast.TypeSpec:
							declared[spec.Name.Name] = true
						case *ast.ValueSpec:
							for _, n := range spec.Names {
								declared[n.Name] = true
							}
						}
					}
				}
			}
		}
		if method == "" && (declared[name] || declared["."+name]) || method != "" && declared[name] && declared[name+"."+method] {
			return true
		}
	}
	return false
}

// TestOnlyTheIntegratorsPackagesAreOutsideInternal keeps the public surface what the
// architecture page says: what integrators import, the design's top-level packages, the
// binaries and the dev tree; everything else is under internal/, and the examples, written
// as an integrator's code, import nothing from it.
func TestOnlyTheIntegratorsPackagesAreOutsideInternal(t *testing.T) {
	public := []string{"client", "apitypes", "webhook", "auditchain", // for integrators
		"api", "workflows", "activities", "worker", "wshub", "wshub/closecode", "migrations", // the design's top level
		"docs", "docs/openapicheck"}
	for pkg := range ourImports(t, "./...") {
		top := strings.SplitN(pkg, "/", 2)[0]
		if top == "internal" || top == "dev" || top == "cmd" || slices.Contains(public, pkg) {
			continue
		}
		t.Errorf("%s is outside internal/ but is not a package integrators import", pkg)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./examples/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), module+"internal/") {
		t.Errorf("an example imports from internal/:\n%s", out)
	}
}
