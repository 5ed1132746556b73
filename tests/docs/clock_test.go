package docs

import (
	"go/ast"
	"go/token"
	"testing"
)

// clockCalls are the time package's readings of the clock and its
// timers: what the simulator cannot see unless it goes through env.
var clockCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "AfterFunc": true, "NewTimer": true,
	"NewTicker": true, "Sleep": true, "After": true, "Tick": true,
}

// TestOneClock holds docs/design.md §20's rule: every reading of the clock
// and every timer of the library's protocol and transport (packages
// redlock, internal/transport, internal/wait and validity) goes through
// env (the transport's through transport.Env, which the Locker's env
// serves), so that the simulator runs all of it on its own clock. Only
// sysEnv's methods, production's env (redlock/env.go), call the time
// package's clock. Package quorum's
// Round.Wait is the blocking driver sysEnv.await calls (the simulator
// drives rounds with Finish instead), and context.AfterFunc starts a
// goroutine the simulator cannot schedule (sysEnv.afterDone): neither is
// called elsewhere.
func TestOneClock(t *testing.T) {
	eachLibraryFile(t, []string{"redlock", "internal/transport", "internal/wait", "validity"}, func(_ string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && isSysEnvMethod(fd) {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, _ := sel.X.(*ast.Ident)
				switch {
				case x != nil && x.Name == "time" && clockCalls[sel.Sel.Name]:
					t.Errorf("%s: time.%s outside sysEnv: read the clock and set timers through the Locker's env", fset.Position(call.Pos()), sel.Sel.Name)
				case x != nil && x.Name == "context" && sel.Sel.Name == "AfterFunc":
					t.Errorf("%s: context.AfterFunc outside sysEnv: use env.afterDone", fset.Position(call.Pos()))
				case sel.Sel.Name == "Wait" && len(call.Args) == 2:
					t.Errorf("%s: a round's Wait outside sysEnv: wait through env.await", fset.Position(call.Pos()))
				}
				return true
			})
		}
	})
}

// isSysEnvMethod reports whether fd is a method of sysEnv.
func isSysEnvMethod(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) != 1 {
		return false
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.Name == "sysEnv"
}
