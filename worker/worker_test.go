package worker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/internal/orders"
)

// TestWorkflowActivitiesAreRegisteredMethods holds the names the workflows call activities
// by to the methods New registers as activities, both ways: a renamed method or constant
// would leave a workflow calling an activity no worker serves (it would wait for it
// forever), and a method no workflow calls is an activity nobody runs.
func TestWorkflowActivitiesAreRegisteredMethods(t *testing.T) {
	acts := Activities{Portfolio: &activities.Portfolio{}, Maintenance: &activities.Maintenance{}, Orders: &activities.Orders{}, Policies: &activities.Policies{}}
	if n := reflect.TypeOf(acts).NumField(); len(acts.structs()) != n {
		t.Fatalf("New registers %d structs, Activities has %d", len(acts.structs()), n)
	}
	// Registering is what a worker does at start-up: it refuses an exported method that
	// cannot be an activity, and a name registered twice.
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	methods := map[string]string{}
	for _, s := range acts.structs() {
		env.RegisterActivity(s)
		typ := reflect.TypeOf(s)
		for i := range typ.NumMethod() {
			if m := typ.Method(i); m.IsExported() {
				methods[m.Name] = typ.Elem().Name()
			}
		}
	}

	called := calledActivities(t, "../workflows")
	if len(called) == 0 {
		t.Fatal("found no activity calls in the workflows")
	}
	for name, at := range called {
		if _, ok := methods[name]; !ok {
			t.Errorf("%s calls activity %q, a method of none of %v", at, name, structNames(acts))
		}
	}
	for name, of := range methods {
		if _, ok := called[name]; !ok {
			t.Errorf("%s.%s is registered as an activity, but no workflow calls %q", of, name, name)
		}
	}
}

// calledActivities reads the workflows' source: the name of every activity passed to
// workflow.ExecuteActivity or ExecuteLocalActivity, with where it is called. A name must be
// a string constant of the package (or a literal), or a step's Activity: anything else
// the test cannot check.
func calledActivities(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	consts := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, file)
		for _, d := range file.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if v, ok := stringLit(vs.Values[i]); ok {
								consts[n.Name] = v
							}
						}
					}
				}
			}
		}
	}
	called := map[string]string{}
	for _, file := range parsed {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "ExecuteActivity" && sel.Sel.Name != "ExecuteLocalActivity") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "workflow" {
				return true
			}
			at := fset.Position(call.Pos()).String()
			if len(call.Args) < 2 {
				t.Errorf("%s: %s without an activity", at, sel.Sel.Name)
				return true
			}
			if sel, isSel := call.Args[1].(*ast.SelectorExpr); isSel && sel.Sel.Name == "Activity" {
				// A step's activity (orders.Step.Activity): the workflow runs every step
				// but the create, which the service applies.
				for _, step := range orders.Steps {
					if step.Activity == "" && step.Name != orders.StepCreated.Name {
						t.Errorf("step %s names no activity", step.Name)
					}
					if step.Activity != "" {
						called[step.Activity] = at
					}
				}
				return true
			}
			name, ok := stringLit(call.Args[1])
			if id, isIdent := call.Args[1].(*ast.Ident); isIdent {
				name, ok = consts[id.Name]
			}
			if !ok {
				t.Errorf("%s: the activity is not named by a string constant", at)
				return true
			}
			called[name] = at
			return true
		})
	}
	return called
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func structNames(acts Activities) []string {
	var out []string
	for _, s := range acts.structs() {
		out = append(out, reflect.TypeOf(s).Elem().Name())
	}
	return out
}
