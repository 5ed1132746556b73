// Command mutant applies one mutant as gremlins (github.com/go-gremlins/gremlins
// v0.6.0) names it in its log, "file.go:LINE:COL MUTATOR", to a Go file in
// place: the operator token at that position is replaced by the one
// gremlins' mutator puts there. scripts/mutate.sh's MUTATE_RECHECK mode
// uses it to run the mutants an earlier gremlins run reported LIVED
// against the fast set as it stands now, without running every mutant
// again.
//
//	go run ./scripts/mutant FILE LINE:COL MUTATOR
//
// It prints "old -> new" and exits 1, changing nothing, when the position
// holds no token the mutator changes (the code moved since the run).
package main

import (
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// mutations is gremlins v0.6.0's table (internal/engine/mappings.go) for
// the mutators it enables by default and the ones a run may turn on.
var mutations = map[string]map[token.Token]token.Token{
	"ARITHMETIC_BASE": {token.ADD: token.SUB, token.MUL: token.QUO, token.QUO: token.MUL,
		token.REM: token.MUL, token.SUB: token.ADD},
	"CONDITIONALS_BOUNDARY": {token.GEQ: token.GTR, token.GTR: token.GEQ,
		token.LEQ: token.LSS, token.LSS: token.LEQ},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.GEQ: token.LSS, token.GTR: token.LEQ,
		token.LEQ: token.GTR, token.LSS: token.GEQ, token.NEQ: token.EQL},
	"INCREMENT_DECREMENT": {token.DEC: token.INC, token.INC: token.DEC},
	"INVERT_NEGATIVES":    {token.SUB: token.ADD},
	"INVERT_LOGICAL":      {token.LAND: token.LOR, token.LOR: token.LAND},
	"INVERT_LOOPCTRL":     {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
	"INVERT_ASSIGNMENTS": {token.ADD_ASSIGN: token.SUB_ASSIGN, token.MUL_ASSIGN: token.QUO_ASSIGN,
		token.QUO_ASSIGN: token.MUL_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN},
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mutant:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: mutant FILE LINE:COL MUTATOR")
	}
	file, at, kind := args[0], args[1], args[2]
	table, ok := mutations[kind]
	if !ok {
		return fmt.Errorf("unknown mutator %q", kind)
	}
	line, col, err := position(at)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	offset, tok, err := tokenAt(src, line, col)
	if err != nil {
		return fmt.Errorf("%s:%s: %w", file, at, err)
	}
	to, ok := table[tok]
	if !ok {
		return fmt.Errorf("%s:%s: %s does not change %q (the code moved?)", file, at, kind, tok)
	}
	out := append([]byte{}, src[:offset]...)
	out = append(out, to.String()...)
	out = append(out, src[offset+len(tok.String()):]...)
	fmt.Printf("%s:%s %s -> %s\n", file, at, tok, to)
	return os.WriteFile(file, out, 0o644)
}

// position parses "LINE:COL".
func position(at string) (line, col int, err error) {
	l, c, ok := strings.Cut(at, ":")
	if !ok {
		return 0, 0, fmt.Errorf("position %q is not LINE:COL", at)
	}
	if line, err = strconv.Atoi(l); err == nil {
		col, err = strconv.Atoi(c)
	}
	if err != nil || line < 1 || col < 1 {
		return 0, 0, fmt.Errorf("position %q is not LINE:COL", at)
	}
	return line, col, nil
}

// tokenAt scans src and returns the byte offset and the token that starts
// at line:col (gremlins' positions are go/token's: 1-based, columns in
// bytes).
func tokenAt(src []byte, line, col int) (int, token.Token, error) {
	fset := token.NewFileSet()
	f := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return 0, 0, fmt.Errorf("no token starts there")
		}
		p := fset.Position(pos)
		if p.Line == line && p.Column == col {
			return f.Offset(pos), tok, nil
		}
		if p.Line > line {
			return 0, 0, fmt.Errorf("no token starts there")
		}
	}
}
