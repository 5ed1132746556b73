package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/driver"
)

// The codec writes each kind of argument as a bulk string.
func TestWriteRESP(t *testing.T) {
	var got bytes.Buffer
	bw := bufio.NewWriter(&got)
	WriteRESP(bw, []Arg{Str("SET"), Suffixed("k", ":fence"), Num(0), Num(18446744073709551615), Str("")})
	bw.Flush()
	want := "*5\r\n$3\r\nSET\r\n$7\r\nk:fence\r\n$1\r\n0\r\n$20\r\n18446744073709551615\r\n$0\r\n\r\n"
	if got.String() != want {
		t.Errorf("wrote %q, want %q", got.String(), want)
	}
	if s := Suffixed("k", ":fence").String() + " " + Num(42).String(); s != "k:fence 42" {
		t.Errorf("String: %q", s)
	}
}

// A command that may not fit the buffer's free space is written piece by
// piece, and the bytes are the same either way.
func TestWriteRESPLarge(t *testing.T) {
	args := []Arg{Str("EVALSHA"), Str(strings.Repeat("s", 40)), Num(2), Str("key"), Suffixed("key", ":fence"), Str("token"), Num(10000)}
	var want bytes.Buffer
	ref := bufio.NewWriterSize(&want, 1<<16)
	WriteRESP(ref, args)
	ref.Flush()
	for _, size := range []int{16, 64, 1 << 16} {
		var got bytes.Buffer
		bw := bufio.NewWriterSize(&got, size)
		bw.WriteString("x") // the buffer already holds a byte
		WriteRESP(bw, args)
		WriteRESP(bw, []Arg{Str(strings.Repeat("v", 3*size))})
		bw.Flush()
		w := "x" + want.String() + "*1\r\n$" + strconv.Itoa(3*size) + "\r\n" + strings.Repeat("v", 3*size) + "\r\n"
		if got.String() != w {
			t.Errorf("buffer of %d: wrote %q, want %q", size, got.String(), w)
		}
	}
}

// BenchmarkWriteRESP is one acquisition's SET and its release, encoded.
func BenchmarkWriteRESP(b *testing.B) {
	bw := bufio.NewWriterSize(io.Discard, 32<<10)
	w := respWriter{bw: bw}
	set := []Arg{Str("SET"), Str("rlbench:{resource-17}"), Str("0123456789abcdef0123456789abcdef"), Str("NX"), Str("PX"), Num(10000)}
	rel := []Arg{Str("EVALSHA"), Str("0123456789abcdef0123456789abcdef01234567"), Num(1), Str("rlbench:{resource-17}"), Str("0123456789abcdef0123456789abcdef")}
	b.ReportAllocs()
	for b.Loop() {
		w.command(set)
		w.command(rel)
		if bw.Available() < 1024 {
			bw.Flush()
		}
	}
}

// readRaw reads every reply type a master sends, keeps simple strings
// only when asked, skips arrays, and refuses what is not RESP2.
func TestReadRaw(t *testing.T) {
	in := "+OK\r\n+OK\r\n-NOSCRIPT No matching script\r\n:-2\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n$1\r\nx\r\n*-1\r\n$0\r\n\r\n"
	br := bufio.NewReader(strings.NewReader(in))
	want := []struct {
		keep bool
		r    Raw
	}{
		{true, Raw{Type: '+', Text: "OK"}},
		{false, Raw{Type: '+'}},
		{false, Raw{Type: '-', Text: "NOSCRIPT No matching script"}},
		{false, Raw{Type: ':', N: -2}},
		{false, Raw{Type: '$', Text: "abc"}},
		{false, Raw{Type: '_'}},
		{false, Raw{Type: '*'}},
		{false, Raw{Type: '_'}},
		{false, Raw{Type: '$'}},
	}
	for i, w := range want {
		r, err := readRaw(br, w.keep)
		if err != nil || r != w.r {
			t.Fatalf("reply %d: %+v, %v; want %+v", i, r, err, w.r)
		}
	}
	if !(Raw{Type: '-', Text: "NOSCRIPT x"}).noScript() || (Raw{Type: '$', Text: "NOSCRIPT"}).noScript() {
		t.Error("noScript")
	}
	if !(Raw{Type: '-', Text: "MOVED 1 a:1"}).redirect() || !(Raw{Type: '-', Text: "ASK 1 a:1"}).redirect() || (Raw{Type: '-', Text: "ERR"}).redirect() {
		t.Error("redirect")
	}
	for _, bad := range []string{"\r\n", "?x\r\n", ":x\r\n", "$-2\r\n", "+OK\n", "*x\r\n"} {
		if _, err := readRaw(bufio.NewReader(strings.NewReader(bad)), false); !errors.Is(err, errProtocol) {
			t.Errorf("%q: %v, want errProtocol", bad, err)
		}
	}
}

// A Master's replies and the links' convert both ways; a bulk "OK" (from
// a client that does not tell it from a status) reads as the status.
func TestRawOfReplyOf(t *testing.T) {
	for _, r := range []Raw{{Type: '_'}, {Type: '+', Text: "OK"}, {Type: '-', Text: "ERR x"}, {Type: ':', N: 7}, {Type: '$', Text: "v"}} {
		if got := RawOf(replyOf(r)); got != r {
			t.Errorf("%+v came back as %+v", r, got)
		}
	}
	if got := RawOf(driver.Reply{Kind: driver.ReplyBulk, Text: "OK"}); got.Type != '+' {
		t.Errorf("bulk OK: %+v, want a status", got)
	}
	if got := RawOf(driver.Reply{Kind: driver.ReplyOther}); got.Type != '*' {
		t.Errorf("other: %+v", got)
	}
}

func TestRunIDOf(t *testing.T) {
	info := "# Server\r\nredis_version:7.2.4\r\nrun_id:abc123\r\ntcp_port:6379\r\n"
	if got := runIDOf(info); got != "abc123" {
		t.Errorf("runIDOf: %q", got)
	}
	if got := runIDOf("# Server\r\n"); got != "" {
		t.Errorf("runIDOf without run_id: %q", got)
	}
}
