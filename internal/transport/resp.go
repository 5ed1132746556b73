package transport

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// The RESP2 codec: writing commands as arrays of bulk strings, and
// reading replies. It knows nothing of connections or commands' meaning.

// respWriter writes RESP commands to bw; it is not safe for concurrent
// use (a stream's writer owns it).
type respWriter struct {
	bw   *bufio.Writer
	num  []byte // scratch for numbers
	args []Arg  // scratch for a command's args
}

// WriteRESP writes args to bw as one RESP array of bulk strings, as the
// fast path writes a command.
func WriteRESP(bw *bufio.Writer, args []Arg) {
	w := respWriter{bw: bw}
	w.command(args)
}

// command writes args as one RESP array of bulk strings: appended in
// place to the buffer's free space when it surely fits (no call into
// bufio per piece), else piece by piece, which flushes as it fills.
func (w *respWriter) command(args []Arg) {
	if need := maxEncoded(args); need <= w.bw.Available() {
		w.bw.Write(appendCommand(w.bw.AvailableBuffer(), args))
		return
	}
	w.head(len(args))
	for _, a := range args {
		switch {
		case a.num:
			w.bulkUint(a.n)
		case a.suffix != "":
			w.bulkSuffix(a.s, a.suffix)
		default:
			w.bulk(a.s)
		}
	}
}

// maxEncoded bounds the bytes of args as one RESP array: 24 for the
// array's header and for each argument's, 20 for a number, a string's
// length.
func maxEncoded(args []Arg) int {
	n := 24
	for _, a := range args {
		n += 24 + len(a.s) + len(a.suffix)
		if a.num {
			n += 20
		}
	}
	return n
}

// appendCommand appends args to b as one RESP array of bulk strings.
func appendCommand(b []byte, args []Arg) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		if a.num {
			var d [20]byte
			digits := strconv.AppendUint(d[:0], a.n, 10)
			b = strconv.AppendInt(b, int64(len(digits)), 10)
			b = append(b, '\r', '\n')
			b = append(b, digits...)
		} else {
			b = strconv.AppendInt(b, int64(len(a.s)+len(a.suffix)), 10)
			b = append(b, '\r', '\n')
			b = append(b, a.s...)
			b = append(b, a.suffix...)
		}
		b = append(b, '\r', '\n')
	}
	return b
}

func (w *respWriter) array(args ...string) {
	w.head(len(args))
	for _, a := range args {
		w.bulk(a)
	}
}

func (w *respWriter) head(n int) {
	w.bw.WriteByte('*')
	w.num = strconv.AppendInt(w.num[:0], int64(n), 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

func (w *respWriter) bulk(s string) {
	w.bulkLen(len(s))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// bulkLen writes a bulk string's header: its length.
func (w *respWriter) bulkLen(n int) {
	w.bw.WriteByte('$')
	w.num = strconv.AppendInt(w.num[:0], int64(n), 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

// bulkSuffix writes s + suffix without building the string.
func (w *respWriter) bulkSuffix(s, suffix string) {
	w.bulkLen(len(s) + len(suffix))
	w.bw.WriteString(s)
	w.bw.WriteString(suffix)
	w.bw.WriteString("\r\n")
}

// bulkUint writes n in decimal as a bulk string, through the number
// scratch (a local array escaped to the heap: one allocation per number).
func (w *respWriter) bulkUint(n uint64) {
	w.num = strconv.AppendUint(w.num[:0], n, 10)
	d := len(w.num)
	w.bw.WriteByte('$')
	w.bw.WriteString(strconv.Itoa(d)) // at most 20: a constant string
	w.bw.WriteString("\r\n")
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

var errProtocol = errors.New("redlock: malformed reply from master")

// readRaw reads one RESP2 reply. Simple strings are kept only when keep
// is set (the Locker's commands only ever get "+OK"); arrays, which it
// never gets, are read and discarded.
func readRaw(br *bufio.Reader, keep bool) (Raw, error) {
	line, err := readLine(br)
	if err != nil {
		return Raw{}, err
	}
	if len(line) == 0 {
		return Raw{}, errProtocol
	}
	switch line[0] {
	case '+':
		r := Raw{Type: '+'}
		if keep {
			r.Text = string(line[1:])
		}
		return r, nil
	case '-':
		return Raw{Type: '-', Text: string(line[1:])}, nil
	case ':':
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return Raw{}, errProtocol
		}
		return Raw{Type: ':', N: n}, nil
	case '$':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n < -1 {
			return Raw{}, errProtocol
		}
		if n == -1 {
			return Raw{Type: '_'}, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return Raw{}, err
		}
		return Raw{Type: '$', Text: string(b[:n])}, nil
	case '*':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n < -1 {
			return Raw{}, errProtocol
		}
		if n == -1 {
			return Raw{Type: '_'}, nil
		}
		for range n {
			if _, err := readRaw(br, false); err != nil {
				return Raw{}, err
			}
		}
		return Raw{Type: '*'}, nil
	}
	return Raw{}, errProtocol
}

// readLine returns a line without its CRLF; the slice is valid until the
// next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errProtocol
	}
	return line[:len(line)-2], nil
}
